"""A trigger the daemon does not answer in time (it is busy; here it is SIGSTOPped, so the
request waits in the socket) is DAEMON_UNAVAILABLE, exit 5, not an INTERNAL bug: the line says
the execution may have been admitted and that --if-exists use-existing makes a retry safe.
Nothing is retried or autostarted behind the caller's back; once the daemon goes on, the
retry with use-existing finds the one execution the first request admitted, or admits it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from cli_support import one_error_line, wait_status

from tests.support import DaemonHandle, kinds
from ys.errors import DaemonUnavailable

# The real command line, with the client's 60 s time-out made short (what a long wait under
# load looks like to the command).
SHORT = """
import sys
from ys.commands import _admit, _output
_admit.client = lambda **kw: _output.client(**{**kw, "timeout": 0.5})
sys.argv = ["ys", *sys.argv[1:]]
from ys.cli import main
main()
"""


@contextmanager
def frozen(daemon: DaemonHandle) -> Iterator[None]:
    """The daemon stopped (SIGSTOP) for the block: it accepts connections, answers nothing."""
    assert daemon.proc is not None
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)


def ys_short(daemon: DaemonHandle, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(daemon.env, YS_AUTOSTART="1")  # a time-out must not start a second daemon
    return subprocess.run(
        [sys.executable, "-c", SHORT, *args], env=env, capture_output=True, text=True, timeout=60
    )


def one_admission(daemon: DaemonHandle, execution_id: str) -> None:
    wait_status(daemon, execution_id, "completed")
    with daemon.client() as c:
        assert kinds(c, execution_id).count("admitted") == 1


def test_a_trigger_that_times_out_exits_5_and_says_how_to_retry_safely(fresh):
    with frozen(fresh):
        result = ys_short(fresh, "trigger", "hello", "--id", "late-1")
    assert result.returncode == 5, result.stderr
    assert result.stdout == ""
    line = one_error_line(result, "DAEMON_UNAVAILABLE")
    assert "did not answer within 0.5 s" in line and "late-1 may have been admitted" in line
    assert "--if-exists use-existing" in line and "bug" not in line
    again = ys_short(fresh, "trigger", "hello", "--id", "late-1", "--if-exists", "use-existing")
    assert again.returncode == 0, again.stderr
    assert again.stdout == "late-1\n"
    one_admission(fresh, "late-1")


def test_without_an_id_the_line_says_where_to_look_and_to_give_one(fresh):
    with frozen(fresh):
        result = ys_short(fresh, "trigger", "hello")
    assert result.returncode == 5, result.stderr
    line = one_error_line(result, "DAEMON_UNAVAILABLE")
    assert "may have been admitted" in line and "ys list --workflow hello" in line
    assert "--id" in line and "--if-exists use-existing" in line


def test_the_client_raises_daemon_unavailable_and_a_use_existing_retry_is_safe(fresh):
    with frozen(fresh), fresh.client(timeout=0.5) as c, pytest.raises(DaemonUnavailable) as info:
        c.trigger("hello", {"n": 1}, execution_id="late-2")
    assert "may have been admitted" in info.value.message
    assert "use-existing" in info.value.message
    with fresh.client() as c:
        result = c.trigger("hello", {"n": 1}, execution_id="late-2", if_exists="use-existing")
    assert result["execution_id"] == "late-2"
    one_admission(fresh, "late-2")
