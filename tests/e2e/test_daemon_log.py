"""The daemon's own log (`<data>/daemon.log` of a daemon started in the background): private,
rotated by size, and a flood of one error (descriptors running out: one traceback per failed
accept) is rate-limited."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import DaemonHandle, alive, make_home, wait_until
from ys.daemon.logsetup import RateLimit

pytestmark = pytest.mark.e2e

CRASHER = """
import os
import ys

@ys.workflow
def main(step, params):
    print("x" * 300, flush=True)
    os._exit(3)  # no outcome: a warning in the daemon's log, and a retry
"""


def _start_in_background(h: DaemonHandle, preexec: Callable[[], None] | None = None) -> int:
    """`ys daemon start`: the daemon writes <home>/daemon.log itself. Its pid."""
    out = subprocess.run(
        [sys.executable, "-m", "ys", "daemon", "start", "--json"],
        env=h.env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=preexec,
    )
    assert out.returncode == 0, out.stderr
    return int(json.loads(out.stdout)["pid"])


def _stop(h: DaemonHandle, pid: int) -> None:
    os.kill(pid, signal.SIGTERM)
    try:
        wait_until(lambda: not alive(pid), timeout=30, message="the daemon to stop")
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
        h.kill_workers()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_flood_of_one_error_is_rate_limited_and_the_daemon_log_is_private(tmp_path: Path):
    h = make_home(tmp_path)

    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (60, 60))

    pid = _start_in_background(h, few_descriptors)
    log = h.home / "daemon.log"
    held: list[socket.socket] = []
    try:
        for _ in range(80):  # more than the daemon may open: its accepts fail with EMFILE
            s = socket.socket(socket.AF_UNIX)
            held.append(s)
            s.connect(str(h.socket))
        wait_until(
            lambda: "more like this are counted" in log.read_text(),
            timeout=30,
            message="the repeated accept error to be held back",
        )
    finally:
        for s in held:
            s.close()
        _stop(h, pid)
    text = log.read_text()
    assert 0 < text.count("socket.accept() out of system resource") <= RateLimit.BURST
    assert _mode(log) == 0o600


def test_the_daemon_log_rotates_by_size_and_the_daemon_s_stderr_follows_it(tmp_path: Path):
    h = make_home(tmp_path, YS_DAEMON_LOG_MAX_BYTES="4096")
    h.write("crasher.py", CRASHER)
    pid = _start_in_background(h)
    try:
        c = h.client()
        for i in range(30):
            c.trigger("crasher", execution_id=f"crasher-{i:02d}")
        third = h.home / "daemon.log.3"
        wait_until(third.exists, timeout=60, message="three rotated files")
        wait_until(lambda: third.stat().st_size > 0, message="the third to be written")
        # what the daemon writes to stderr outside logging goes to the current file too
        assert os.readlink(f"/proc/{pid}/fd/2") == str(h.home / "daemon.log")
    finally:
        _stop(h, pid)
    files = sorted(p.name for p in h.home.glob("daemon.log*"))
    assert files == ["daemon.log", "daemon.log.1", "daemon.log.2", "daemon.log.3"]
    for name in files:
        assert (h.home / name).stat().st_size <= 4096
        assert _mode(h.home / name) == 0o600
    assert "stopped" in (h.home / "daemon.log").read_text()  # the newest is the live one


def test_the_rate_limit_lets_a_burst_through_then_counts_until_the_window_ends():
    import logging

    now = [0.0]
    limit = RateLimit(clock=lambda: now[0])

    def record(msg: str, level: int = logging.ERROR) -> logging.LogRecord:
        return logging.LogRecord("ys.test", level, __file__, 1, msg, None, None)

    passed = [limit.filter(record("disk full")) for _ in range(RateLimit.BURST + 3)]
    assert passed == [True] * RateLimit.BURST + [False] * 3
    assert limit.filter(record("another error"))  # other messages are not held back
    assert all(limit.filter(record("chatty", logging.INFO)) for _ in range(20))
    now[0] += RateLimit.WINDOW
    again = record("disk full")
    assert limit.filter(again)
    assert "[3 more like this were not logged" in again.getMessage()
