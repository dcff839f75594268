"""No execution runs in two workers at once when its daemon dies or stops: a worker ends its
process group as soon as its daemon is gone, or once its lease was not renewed in time (its
own deadline); a starting daemon makes sure what the one before left is gone before it
delivers again.

Each workflow's step runs a command that appends `tick <pid>` to a file until the test creates
a go-file; the attempts of one step are told apart by that pid, so "no overlap" is: no tick of
an old attempt after the first tick of the next one."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from e2e_support import DaemonHandle, wait_until

pytestmark = pytest.mark.e2e

LEASE = 3.0  # YS_LEASE_SECONDS in the fixture (tests/support.py)

# The step's command: ticks until the go-file exists (optionally deaf to SIGTERM).
TICKER = 'while [ ! -e "$1/go" ]; do echo "tick $$" >> "$1/ticks"; sleep 0.05; done'
DEAF = "trap '' TERM; "

PYTHON = """
import subprocess
import ys


def tick(d, command):
    subprocess.run(["sh", "-c", command, "sh", d], check=True)
    return "ticked"


@ys.workflow
def main(step, params):
    return step.run("tick", tick, params["d"], params["command"])
"""


def _write(daemon: DaemonHandle, kind: str, command: str) -> str:
    if kind == "python":
        daemon.write("ticker.py", PYTHON)
    else:
        quoted = command.replace("'", "'\\''")
        daemon.write(
            "ticker",
            f"#!/bin/sh\nset -e\nys step run tick -- sh -c '{quoted}' sh \"$(ys step params d)\"\n",
            mode=0o700,
        )
    return "ticker"


def _ticks(d: Path) -> list[int]:
    try:
        text = (d / "ticks").read_text()
    except FileNotFoundError:
        return []
    return [int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("tick ")]


def _attempts(d: Path) -> list[int]:
    """The pids of the step's attempts, in the order they first ticked."""
    seen: list[int] = []
    for pid in _ticks(d):
        if pid not in seen:
            seen.append(pid)
    return seen


def _members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry))
    return found


def _assert_no_overlap(d: Path) -> None:
    ticks = _ticks(d)
    first, second = _attempts(d)[:2]
    new_from = ticks.index(second)
    assert first not in ticks[new_from:], "the old attempt ticked after the new one began"


@pytest.fixture
def fx(tmp_path: Path) -> Path:
    d = tmp_path / "fx"
    d.mkdir(mode=0o700)
    return d


def _trigger(
    daemon: DaemonHandle, fx: Path, kind: str, deaf: bool, head: str = ""
) -> tuple[str, int]:
    """Start the ticking workflow; its execution ID and its worker's pid (its group)."""
    command = head + (DEAF if deaf else "") + TICKER
    name = _write(daemon, kind, command)
    c = daemon.client()
    eid = c.trigger(name, {"d": str(fx), "command": command})["execution_id"]
    wait_until(lambda: _ticks(fx), message="the step to tick")
    [worker] = daemon.worker_pids()
    return eid, worker


def _complete(daemon: DaemonHandle, fx: Path, eid: str) -> None:
    wait_until(lambda: len(_attempts(fx)) == 2, timeout=30, message="the step run again")
    (fx / "go").touch()
    record = daemon.client().wait(eid, timeout=30)
    assert record["status"] == "completed", record
    _assert_no_overlap(fx)


@pytest.mark.parametrize("deaf", [False, True], ids=["plain", "ignores-sigterm"])
@pytest.mark.parametrize("kind", ["python", "shell"])
def test_a_worker_ends_its_group_when_its_daemon_is_killed_and_the_next_never_overlaps_it(
    daemon: DaemonHandle, fx: Path, kind: str, deaf: bool
):
    eid, worker = _trigger(daemon, fx, kind, deaf)
    daemon.kill9()
    # No daemon runs now: the worker's group ends by itself, at once (well within a lease).
    wait_until(
        lambda: not _members(worker), timeout=LEASE, message="the orphan's group to end itself"
    )
    daemon.start()
    _complete(daemon, fx, eid)


@pytest.mark.parametrize("kind", ["python", "shell"])
def test_a_worker_whose_daemon_is_stopped_past_its_lease_ends_itself(
    daemon: DaemonHandle, fx: Path, kind: str
):
    eid, worker = _trigger(daemon, fx, kind, deaf=True)
    assert daemon.proc is not None
    os.kill(daemon.proc.pid, signal.SIGSTOP)
    try:
        # Nobody renews its lease: the worker's own deadline ends its group, within the lease
        # (measured from the last renewal, at most a third of a lease before the stop).
        wait_until(
            lambda: not _members(worker), timeout=LEASE + 2, message="the worker to end itself"
        )
    finally:
        os.kill(daemon.proc.pid, signal.SIGCONT)
    _complete(daemon, fx, eid)


def test_a_starting_daemon_ends_what_is_left_of_an_old_workers_group(
    daemon: DaemonHandle, fx: Path
):
    # (A group that loses its leader while stopped gets SIGHUP: this command ignores it.)
    eid, worker = _trigger(daemon, fx, "python", deaf=False, head="trap '' HUP; ")
    # A group that could not end itself: stopped while its daemon dies, then its leader (the
    # worker, which watches the daemon) killed alone; what is left runs on.
    os.killpg(worker, signal.SIGSTOP)
    daemon.kill9()
    os.kill(worker, signal.SIGKILL)
    # gone for good (reaped): only its group's pid is left to find the rest by
    wait_until(lambda: not os.path.exists(f"/proc/{worker}"), message="the leader reaped")
    left = _members(worker)
    assert left, "the step's command should outlive its worker"
    os.killpg(worker, signal.SIGCONT)
    try:
        daemon.start()
        # recovery ended the group before the new daemon answered (before any delivery)
        assert _members(worker) == []
        _complete(daemon, fx, eid)
    finally:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
