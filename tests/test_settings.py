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
        ("log_max_bytes = '10 parsecs'\n", {}, "log_max_bytes must be a size in bytes"),
        ("log_max_bytes = 0\n", {}, "log_max_bytes must be a size in bytes"),
        ("lease_seconds = 0\n", {}, "config.toml: lease_seconds must be a duration over 0"),
        ("lease_seconds = 'soon'\n", {}, "lease_seconds must be a duration"),
        ("grace_seconds = -1\n", {}, "grace_seconds must be a duration"),
        ("retention_days = true\n", {}, "retention_days must be a number of days"),
        ("launcher = 'cold'\n", {}, "launcher must be warm or spawn"),
        ("", {"YS_LEASE_SECONDS": "0"}, "YS_LEASE_SECONDS must be a duration over 0"),
        ("", {"YS_CANCEL_GRACE_SECONDS": "ten"}, "YS_CANCEL_GRACE_SECONDS must be a duration"),
        ("", {"YS_RETRY_BASE_SECONDS": "-0.5"}, "YS_RETRY_BASE_SECONDS must be a duration"),
        ("", {"YS_RETENTION_DAYS": "1w"}, "YS_RETENTION_DAYS must be a number of days"),
        ("", {"YS_DAEMON_LOG_MAX_BYTES": "5MB!"}, "YS_DAEMON_LOG_MAX_BYTES must be a size"),
        ("", {"YS_LOG_LEVEL": "loud"}, "YS_LOG_LEVEL must be one of DEBUG, INFO"),
        ("", {"YS_LAUNCHER": "cold"}, "YS_LAUNCHER must be warm or spawn"),
        ("", {"YS_KEEPALIVE_SECONDS": "nan"}, "YS_KEEPALIVE_SECONDS must be a duration"),
        ("", {"YS_READ_TIMEOUT_SECONDS": "0s"}, "YS_READ_TIMEOUT_SECONDS must be a duration"),
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


def test_a_tuning_value_from_the_file_takes_effect_and_the_environment_wins(tmp_path):
    write(
        tmp_path,
        "lease_seconds = 5\ngrace_seconds = '2m'\ncancel_grace_seconds = 0\n"
        "retry_base_seconds = 0.25\nretention_days = 7\ndaemon_log_max_bytes = '64K'\n"
        "log_level = 'warning'\nlauncher = 'spawn'\nkeepalive_seconds = 5\n"
        "read_timeout_seconds = '1m'\nlog_max_bytes = '10MiB'\n",
    )
    s = load(tmp_path, env={})
    assert (s.lease_seconds, s.grace_seconds, s.cancel_grace_seconds) == (5.0, 120.0, 0.0)
    assert (s.retry_base_seconds, s.retention_days, s.retention) == (0.25, 7.0, 7 * 86400.0)
    assert (s.daemon_log_max_bytes, s.log_max_bytes) == (64 * 1024, 10 * 1024 * 1024)
    assert (s.log_level, s.launcher) == ("WARNING", "spawn")
    assert (s.keepalive_seconds, s.read_timeout_seconds) == (5.0, 60.0)
    env = {
        "YS_LEASE_SECONDS": "3",
        "YS_GRACE_SECONDS": "1.5",
        "YS_RETENTION_DAYS": "12h",  # a unit says its own; a bare number counts days
        "YS_LAUNCHER": "warm",
        "YS_DAEMON_LOG_MAX_BYTES": "4096",
    }
    s = load(tmp_path, env=env)
    assert (s.lease_seconds, s.grace_seconds, s.retention_days) == (3.0, 1.5, 0.5)
    assert (s.launcher, s.daemon_log_max_bytes) == ("warm", 4096)
    assert s.read_timeout_seconds == 60.0  # not in the environment: the file's
    assert s.changed()["lease_seconds"] == 3.0 and "concurrency" not in s.changed()
    assert set(s.tuning()) >= {"lease_seconds", "launcher", "log_level", "retention_days"}


def test_the_otel_variables_are_captured_with_the_settings(tmp_path):
    env = {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "x", "YS_OTELX": "no"}
    assert load(tmp_path, env=env).otel_env == {
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_SERVICE_NAME": "x",
    }


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
