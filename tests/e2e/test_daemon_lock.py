"""One daemon per database, whatever socket or runtime folder a second one is given; and a
daemon that cannot start exits non-zero, frees its lock, and says why where `ys` shows it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_support import alive, count, fixture_dir, go, lines, wait_until, write_workflow

pytestmark = pytest.mark.e2e

BLOCKED = """
@ys.workflow
def main(step, params):
    step.run("work", block, params["d"], "work")
    return "done"
"""


def _second_env(daemon, tmp_path: Path, how: str) -> tuple[dict[str, str], Path]:
    """The environment of a second daemon on the first one's database, and its socket."""
    env = dict(daemon.env)
    if how == "another socket":
        sock = tmp_path / "elsewhere" / "ys.sock"
        env["YS_SOCKET"] = str(sock)
        return env, sock
    other = tmp_path / "other-home"  # another home, its own runtime folder, the same YS_DB
    other.mkdir(mode=0o700)
    env.update(YS_HOME=str(other), YS_DB=str(daemon.db))
    return env, other / "run" / "ys.sock"


@pytest.mark.parametrize("how", ["another socket", "another home with YS_DB"])
def test_a_second_daemon_on_the_same_database_refuses_and_names_the_first(daemon, tmp_path, how):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "blocked", BLOCKED)
    c = daemon.client()
    c.trigger("blocked", {"d": str(fx)}, execution_id="blocked-1")
    wait_until(lambda: count(fx, "work:start") == 1, message="the step to start")
    worker = int(lines(fx)[0].rsplit(":", 1)[1])

    env, sock = _second_env(daemon, tmp_path, how)
    log = tmp_path / "second.log"
    with open(log, "wb") as out:
        second = subprocess.Popen(
            [sys.executable, "-m", "ys.daemon", "run"],
            env=env,
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        # It exits; before the fix it served on its own socket instead.
        wait_until(
            lambda: second.poll() is not None or sock.exists(),
            timeout=30,
            message="the second daemon to exit (or to serve)",
        )
        wait_until(lambda: second.poll() is not None, timeout=10, message="it to exit")
    finally:
        if second.poll() is None:
            second.kill()
            second.wait(timeout=10)
    stderr = log.read_text()
    assert second.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    assert "already running" in last and f"pid {daemon.proc.pid}" in last, stderr
    assert not sock.exists()

    # The first one kept its lease and its worker: the step ran once, and completes.
    assert alive(worker)
    go(fx, "work")
    assert c.wait("blocked-1", timeout=30)["outcome"] == {"status": "completed", "result": "done"}
    assert count(fx, "work:start") == 1
    assert daemon.proc.poll() is None


def test_the_lock_sits_beside_the_database_and_names_its_pid(daemon):
    lock = Path(f"{daemon.db}.lock")
    assert lock.read_text().strip() == str(daemon.proc.pid)


def test_a_daemon_that_cannot_start_exits_1_frees_its_lock_and_ys_prints_why(ys_home, tmp_path):
    # A socket path longer than AF_UNIX allows: start-up fails after the store and the
    # registry are up, when the socket is bound.
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    env = {"YS_SOCKET": str(deep / "ys.sock")}
    started = ys_home.ys("daemon", "start", env=env, timeout=90)
    assert started.returncode == 5, started.stderr
    line = started.stderr.strip().splitlines()[-1]
    assert line.startswith(
        "DAEMON_UNAVAILABLE: the daemon did not start (ys: the daemon could not start: "
    ), line
    assert "too long" in line

    run = subprocess.run(
        [sys.executable, "-m", "ys.daemon", "run"],
        capture_output=True,
        text=True,
        env={**ys_home.env, **env},
        timeout=90,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith("ys: the daemon could not start: ")
    # the lock was freed: a daemon on a usable socket starts on the same database at once
    info = json.loads(ys_home.start().ys("daemon", "status", "--json").stdout)
    assert info["pid"] == ys_home.proc.pid
    assert os.path.exists(ys_home.db)


def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_left_alone(ys_home, tmp_path):
    """The lock is opened without following a symlink: one planted beside a shared database
    must not make the daemon truncate (or write its pid into) another file."""
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    lock = Path(str(ys_home.db) + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.symlink_to(target)
    run = subprocess.run(
        [sys.executable, "-m", "ys.daemon", "run"],
        capture_output=True,
        text=True,
        env=ys_home.env,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith("ys: the daemon could not start: ")
    assert target.read_text() == "keep me\n"
