"""`ys doctor`: passes on a healthy home, and fails (exit 1) with a check that names the
problem when the workflows folder is writable by others or a record was tampered with."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest
from cron_support import wait_status

NAMES = {
    "settings",
    "home",
    "logs folder",
    "runtime folder",
    "socket",
    "workflows folder",
    "daemon",
    "database",
    "schema",
    "histories",
    "time zone",
    "environment",
    "tracing",
    "ys for scripts",
}


@pytest.fixture
def healthy(home):
    home.start()
    with home.client() as c:
        c.trigger("hello", {"n": 1}, execution_id="done")
    wait_status(home, "done", "completed")
    return home


def doctor(daemon) -> tuple[int, dict[str, dict]]:
    result = daemon.ys("doctor", "--json")
    checks = json.loads(result.stdout)["checks"]
    assert all(set(c) >= {"name", "ok", "detail"} for c in checks)
    return result.returncode, {c["name"]: c for c in checks}


def test_a_healthy_home_passes(healthy):
    code, checks = doctor(healthy)
    assert code == 0, checks
    assert set(checks) == NAMES and all(c["ok"] for c in checks.values())
    assert "1 execution" in checks["histories"]["detail"]
    assert checks["schema"]["ok"] and "executions 1" in checks["schema"]["detail"]
    people = healthy.ys("doctor")
    assert people.returncode == 0 and "all checks passed" in people.stderr
    assert "histories" in people.stdout


def test_no_daemon_is_a_warning_and_none_is_started(home):
    code, checks = doctor(home)
    assert code == 0
    assert checks["daemon"]["ok"] and checks["daemon"]["level"] == "warning"
    assert not home.socket.exists()


def test_a_workflows_folder_others_can_write_fails(healthy):
    os.chmod(healthy.workflows, 0o770)
    code, checks = doctor(healthy)
    assert code == 1
    bad = [name for name, c in checks.items() if not c["ok"]]
    assert bad == ["workflows folder"]
    assert "writable by others" in checks["workflows folder"]["detail"]
    people = healthy.ys("doctor")
    assert people.returncode == 1 and "workflows folder" in people.stderr


def test_a_tampered_record_fails_the_history_check(healthy):
    conn = sqlite3.connect(healthy.db)
    with conn:
        conn.execute("UPDATE executions SET status='failed' WHERE execution_id='done'")
    conn.close()
    code, checks = doctor(healthy)
    assert code == 1
    assert not checks["histories"]["ok"] and "done" in checks["histories"]["detail"]
    assert checks["database"]["ok"]  # the file is intact; its record is not


BAD_SCHEDULE = """
    import ys

    @ys.workflow(schedule="0 3 * *")
    def main(step, params):
        return 1
"""


def test_a_script_that_does_not_load_fails_without_a_daemon_too(home):
    home.write("nightly.py", BAD_SCHEDULE)
    code, checks = doctor(home)
    assert code == 1
    assert [name for name, c in checks.items() if not c["ok"]] == ["workflows folder"]
    assert "nightly: bad schedule" in checks["workflows folder"]["detail"]
    assert not home.socket.exists()  # it looked at the folder itself: no daemon was started


def test_a_failure_handler_that_names_no_workflow_fails_without_a_daemon_too(home):
    (home.home / "config.toml").write_text('on_failure = "nobody"\n')
    code, checks = doctor(home)
    assert code == 1
    assert [name for name, c in checks.items() if not c["ok"]] == ["workflows folder"]
    assert "on_failure names nobody" in checks["workflows folder"]["detail"]
    assert not home.socket.exists()


def test_a_process_that_holds_the_lock_but_does_not_answer_fails(home):
    import fcntl

    lock = home.db.parent / f"{home.db.name}.lock"
    with open(lock, "a+") as f:  # what a daemon stuck in its start-up looks like
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        f.write(f"{os.getpid()}\n")
        f.flush()
        code, checks = doctor(home)
    assert code == 1
    assert not checks["daemon"]["ok"]
    assert f"pid {os.getpid()} holds the database lock" in checks["daemon"]["detail"]
    code, checks = doctor(home)  # released: nothing runs, which is only a warning
    assert code == 0 and checks["daemon"]["level"] == "warning"
