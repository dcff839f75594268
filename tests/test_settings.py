"""ys.settings: config.toml read with tomllib, the environment over it, options over both;
every refusal names where the bad value came from; `redact` hides passwords."""

from __future__ import annotations

from pathlib import Path

import pytest

from ys.errors import InvalidArgument
from ys.settings import DEFAULT_LOG_MAX_BYTES, Settings, load, redact


def write(folder: Path, text: str) -> None:
    (folder / "config.toml").write_text(text)


def test_no_file_and_no_environment_give_the_defaults(tmp_path):
    assert load(tmp_path, env={}) == Settings(None, 4, None, DEFAULT_LOG_MAX_BYTES)


def test_the_environment_wins_over_the_file_and_options_over_both(tmp_path):
    write(
        tmp_path,
        'database = "postgresql://a@h/one"\nconcurrency = 2\n'
        'on_failure = "notify"\nlog_max_bytes = 1000\n',
    )
    assert load(tmp_path, env={}) == Settings("postgresql://a@h/one", 2, "notify", 1000)
    env = {"YS_DATABASE": "postgres://b@h/two", "YS_CONCURRENCY": "3", "YS_LOG_MAX_BYTES": "9"}
    assert load(tmp_path, env=env) == Settings("postgres://b@h/two", 3, "notify", 9)
    assert load(tmp_path, env=env, concurrency=8, database="postgresql://c@h/three") == Settings(
        "postgresql://c@h/three", 8, "notify", 9
    )
    assert load(tmp_path, env={"YS_DATABASE": ""}).database == "postgresql://a@h/one"


@pytest.mark.parametrize(
    ("text", "env", "says"),
    [
        ("colour = 'blue'\n", {}, "unknown key 'colour'"),
        ("concurrency = 0\n", {}, "config.toml: concurrency must be a whole number"),
        ("concurrency = true\n", {}, "concurrency must be"),
        ("concurrency = 2.5\n", {}, "concurrency must be"),
        ("log_max_bytes = '10MiB'\n", {}, "log_max_bytes must be a whole number of bytes"),
        ("on_failure = 'no/slashes'\n", {}, "on_failure must be a workflow name"),
        ("database = 42\n", {}, "database must be a PostgreSQL URL"),
        ("database = 'sqlite:///x.db'\n", {}, "database must be a PostgreSQL URL"),
        ("[database]\nurl = 'x'\n", {}, "database must be a PostgreSQL URL"),
        ("concurrency = \n", {}, "is not valid TOML"),
        ("", {"YS_CONCURRENCY": "many"}, "YS_CONCURRENCY must be a whole number"),
        ("", {"YS_DATABASE": "mysql://u@h/db"}, "YS_DATABASE must be a PostgreSQL URL"),
    ],
)
def test_a_bad_setting_is_invalid_argument_naming_its_source(tmp_path, text, env, says):
    write(tmp_path, text)
    with pytest.raises(InvalidArgument) as err:
        load(tmp_path, env=env)
    assert err.value.code == "INVALID_ARGUMENT"
    assert says in err.value.message
    assert "; " in err.value.message  # it says what to do


def test_a_refused_database_url_never_shows_its_password(tmp_path):
    with pytest.raises(InvalidArgument) as err:
        load(tmp_path, env={"YS_DATABASE": "mysql://me:hunter2@db.example/app"})
    assert "hunter2" not in err.value.message and "me:***@db.example" in err.value.message


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://ys:s3cret@db:5432/ys", "postgresql://ys:***@db:5432/ys"),
        ("postgresql://ys@db/ys", "postgresql://ys@db/ys"),
        (
            "postgres://ys:p%40ss@h1:5432,h2:5433/ys?sslmode=require",
            "postgres://ys:***@h1:5432,h2:5433/ys?sslmode=require",
        ),
        (
            "postgresql:///ys?host=/run/pg&password=s3cret",
            "postgresql:///ys?host=/run/pg&password=***",
        ),
        ("postgresql://u:a@b@host/db", "postgresql://u:***@host/db"),
        ("postgresql://db.internal/ys", "postgresql://db.internal/ys"),
    ],
)
def test_redact_hides_the_password_and_keeps_the_rest(url, shown):
    assert redact(url) == shown


def test_only_a_url_names_postgresql_a_file_named_postgres_is_a_file():
    from ys.store import is_postgres

    assert is_postgres("postgresql://u@h/db") and is_postgres("postgres://h/db")
    assert not is_postgres("postgres") and not is_postgres("/data/postgresql")
    assert not is_postgres(None)
