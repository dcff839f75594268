"""Settings end to end: config.toml and the environment choose the daemon's
concurrency and database; a bad setting stops `ys daemon run` and `start` with one line and
exit 2 and is what `ys doctor` reports; `ys daemon status` names the daemon and its database,
never a password."""

from __future__ import annotations

import json
import subprocess
import sys

from cli_support import daemons_for, one_error_line, out_json, stop_pids


def config(home, text: str) -> None:
    (home.home / "config.toml").write_text(text)


def doctor_check(home, name: str, **env: str) -> dict:
    result = home.ys("doctor", "--json", env=env)
    return next(c for c in json.loads(result.stdout)["checks"] if c["name"] == name)


def test_config_toml_sets_concurrency_and_the_environment_wins(ys_home):
    config(ys_home, "concurrency = 2\n")
    try:
        out_json(ys_home.ys("daemon", "start", "--json"))
        assert out_json(ys_home.ys("daemon", "status", "--json"))["concurrency"] == 2
        assert out_json(ys_home.ys("daemon", "stop", "--json"))["stopped"] is True
        out_json(ys_home.ys("daemon", "start", "--json", env={"YS_CONCURRENCY": "3"}))
        assert out_json(ys_home.ys("daemon", "status", "--json"))["concurrency"] == 3
    finally:
        stop_pids(daemons_for(ys_home.home))


def test_an_unknown_key_stops_the_daemon_with_one_line_and_doctor_reports_it(ys_home):
    config(ys_home, 'concurrency = 2\ncolour = "blue"\n')
    run = subprocess.run(
        [sys.executable, "-m", "ys", "daemon", "run"],
        env=ys_home.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and run.stdout == ""
    assert "unknown key 'colour'" in one_error_line(run, "INVALID_ARGUMENT")
    start = ys_home.ys("daemon", "start")
    assert start.returncode == 2
    assert "unknown key 'colour'" in one_error_line(start, "INVALID_ARGUMENT")
    assert not ys_home.socket.exists() and daemons_for(ys_home.home) == []
    check = doctor_check(ys_home, "settings")
    assert check["level"] == "error" and "unknown key 'colour'" in check["detail"]
    assert ys_home.ys("doctor").returncode == 1


def test_a_bad_database_url_is_refused_without_showing_its_password(ys_home):
    env = {"YS_DATABASE": "mysql://app:hunter2@db.example/app"}
    start = ys_home.ys("daemon", "start", env=env)
    assert start.returncode == 2
    line = one_error_line(start, "INVALID_ARGUMENT")
    assert "YS_DATABASE must be a PostgreSQL URL" in line and "hunter2" not in line
    run = ys_home.ys("daemon", "run", "--database", "sqlite:///tmp/x.db")
    assert run.returncode == 2 and "--database must be a PostgreSQL URL" in run.stderr
    doctor = ys_home.ys("doctor", "--json", env=env)
    assert doctor.returncode == 1 and "hunter2" not in doctor.stdout + doctor.stderr
    assert daemons_for(ys_home.home) == []


def test_doctor_says_which_database_is_in_use_without_its_password(ys_home):
    sqlite = doctor_check(ys_home, "settings")
    assert sqlite["ok"] and f"the SQLite file {ys_home.db}" in sqlite["detail"]
    url = "postgresql://app:hunter2@/ys?host=/nonexistent-ys-socket-dir"
    result = ys_home.ys("doctor", "--json", env={"YS_DATABASE": url})
    assert "hunter2" not in result.stdout + result.stderr
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert "PostgreSQL at postgresql://app:***@/ys?host=" in checks["settings"]["detail"]
    assert checks["database"]["level"] == "error"  # nothing listens there
    assert "cannot connect to PostgreSQL at postgresql://app:***@" in checks["database"]["detail"]
    assert "YS_DATABASE=postgresql://app:***@" in checks["environment"]["detail"]


def test_status_names_the_daemon_and_its_database_and_the_id_survives_restarts(ys_home):
    daemon = ys_home.start()
    info = out_json(daemon.ys("daemon", "status", "--json"))
    ident = info["daemon_id"]
    assert ident.split("-")[0] and len(ident.rsplit("-", 1)[1]) == 6
    assert (ys_home.home / "daemon-id").read_text().strip() == ident
    assert info["database"] == {"kind": "sqlite", "location": str(ys_home.db), "reachable": True}
    people = daemon.ys("daemon", "status")
    assert ident in people.stdout and "sqlite" in people.stdout
    daemon.stop()
    again = out_json(ys_home.start().ys("daemon", "status", "--json"))
    assert again["daemon_id"] == ident and again["pid"] != info["pid"]


def test_a_damaged_daemon_id_file_stops_the_daemon_with_what_to_do(ys_home):
    (ys_home.home / "daemon-id").write_text("two words\n")
    run = ys_home.ys("daemon", "run")
    assert run.returncode == 2
    assert "remove it to make a new one" in one_error_line(run, "INVALID_ARGUMENT")


def test_ys_imports_without_psycopg_and_a_postgresql_daemon_says_what_to_install(ys_home):
    blocked = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "import ys, ys.cli, ys.client, ys.daemon.main, ys.store, ys.store.postgres\n"
        "from ys.daemon.__main__ import main\n"
        "sys.exit(main(['run']))\n"
    )
    env = {**ys_home.env, "YS_DATABASE": "postgresql://ys@/ys?host=/nonexistent"}
    run = subprocess.run(
        [sys.executable, "-c", blocked], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 3, run.stderr
    assert "pip install 'ys[postgres]'" in one_error_line(run, "FAILED_PRECONDITION")
    assert daemons_for(ys_home.home) == []


def test_a_tuning_key_in_config_toml_takes_effect_and_the_environment_wins(ys_home):
    """`log_level` and `lease_seconds` from config.toml reach the daemon (its log, its status);
    YS_LOG_LEVEL and YS_LEASE_SECONDS win over them."""
    config(ys_home, 'log_level = "warning"\nlease_seconds = "2m"\nlauncher = "spawn"\n')
    log = ys_home.home / "daemon.log"
    unset = {"YS_LOG_LEVEL": "", "YS_LEASE_SECONDS": ""}  # empty counts as unset
    try:
        out_json(ys_home.ys("daemon", "start", "--json", env=unset))
        settings = out_json(ys_home.ys("daemon", "status", "--json"))["settings"]
        assert settings["log_level"] == "WARNING" and settings["lease_seconds"] == 120.0
        assert settings["launcher"] == "spawn" and settings["cancel_grace_seconds"] == 10.0
        assert "listening on" not in log.read_text()  # an INFO line, under WARNING
        people = ys_home.ys("daemon", "status").stdout
        assert "lease_seconds 120" in people and "log_level WARNING" in people
        assert out_json(ys_home.ys("daemon", "stop", "--json"))["stopped"] is True
        log.write_text("")
        env = {"YS_LOG_LEVEL": "INFO", "YS_LEASE_SECONDS": "45", "YS_RETENTION_DAYS": "12h"}
        out_json(ys_home.ys("daemon", "start", "--json", env=env))
        settings = out_json(ys_home.ys("daemon", "status", "--json"))["settings"]
        assert (settings["log_level"], settings["lease_seconds"]) == ("INFO", 45.0)
        assert settings["retention_days"] == 0.5 and settings["launcher"] == "spawn"
        assert "listening on" in log.read_text()
        tuning = doctor_check(ys_home, "tuning", **env)
        assert tuning["ok"] and "lease_seconds 45" in tuning["detail"]
        assert "launcher spawn" in tuning["detail"]
    finally:
        stop_pids(daemons_for(ys_home.home))


def test_a_bad_tuning_value_stops_the_daemon_with_one_line_naming_it(ys_home):
    env = {"YS_LEASE_SECONDS": "soon"}
    run = ys_home.ys("daemon", "run", env=env)
    assert run.returncode == 2 and run.stdout == ""
    assert "YS_LEASE_SECONDS must be a duration" in one_error_line(run, "INVALID_ARGUMENT")
    start = ys_home.ys("daemon", "start", env={"YS_LAUNCHER": "cold"})
    assert start.returncode == 2
    assert "YS_LAUNCHER must be warm or spawn" in one_error_line(start, "INVALID_ARGUMENT")
    config(ys_home, "cancel_grace_seconds = -1\n")
    start = ys_home.ys("daemon", "start")
    assert start.returncode == 2
    line = one_error_line(start, "INVALID_ARGUMENT")
    assert "config.toml: cancel_grace_seconds must be a duration" in line
    assert not ys_home.socket.exists() and daemons_for(ys_home.home) == []
    check = doctor_check(ys_home, "settings")
    assert check["level"] == "error" and "cancel_grace_seconds" in check["detail"]


def test_doctor_says_the_tuning_values_are_the_defaults(ys_home):
    from ys.settings import ENV

    tuning = doctor_check(ys_home, "tuning", **dict.fromkeys(ENV.values(), ""))
    assert tuning["ok"] and tuning["detail"] == "the defaults"
