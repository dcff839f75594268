"""Workers' pid files, one per running worker under <runtime>/workers, so that the next daemon
can end what this one left (recovery's first step, ys.daemon.recovery), and that ending.

A worker is a session of its own (its pid is its process group's and its session's), so what
it started is found by that number even after the worker itself is gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path

from ys.paths import Paths

log = logging.getLogger("ys.recovery")


def _workers_dir(paths: Paths) -> Path:
    return paths.runtime / "workers"


def _start_time(pid: int) -> str | None:
    """The process's start time (Linux /proc), to tell a reused PID from our worker."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[19]
    except (OSError, IndexError):
        return None


def record_worker(paths: Paths, pid: int, execution_id: str) -> None:
    """Note a started worker (with its start time, to tell a reused pid from it)."""
    d = _workers_dir(paths)
    d.mkdir(exist_ok=True, mode=0o700)
    (d / str(pid)).write_text(f"{_start_time(pid) or '-'} {execution_id}\n")


def forget_worker(paths: Paths, pid: int) -> None:
    """The worker has exited."""
    try:
        (_workers_dir(paths) / str(pid)).unlink()
    except FileNotFoundError:
        pass


ORPHANS_GRACE = 10.0  # seconds a starting daemon waits for the killed orphans to be gone


def _members(group: int) -> list[int]:
    """The live (not zombie) processes of process group or session `group` (Linux /proc): a
    worker's session outlives its leader while anything it started runs."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                state, _ppid, pgrp, session = f.read().rsplit(")", 1)[1].split()[:4]
        except (OSError, ValueError):
            continue
        if state != "Z" and group in (int(pgrp), int(session)):
            found.append(int(entry))
    return found


def _end(group: int) -> bool:
    """SIGKILL what is left of a worker's group and session; whether anything was."""
    members = _members(group)
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return bool(members)


def kill_orphans(paths: Paths, grace: float = ORPHANS_GRACE) -> int:
    """At daemon start, before any delivery: end what every worker a previous daemon left is
    running, and wait until it is gone (recovery's first step); returns how many workers
    had something left. A worker's group is its own while its leader is the recorded process
    (same start time) or gone: a pid is not given again while a group of its number exists."""
    d = _workers_dir(paths)
    if not d.is_dir():
        return 0
    groups: dict[int, str] = {}
    for f in d.iterdir():
        try:
            pid = int(f.name)
            started, _, execution_id = f.read_text().strip().partition(" ")
        except (ValueError, OSError):
            continue
        now_started = _start_time(pid)
        if now_started is None or started in ("-", now_started):
            groups[pid] = execution_id
    killed = [pid for pid in groups if _end(pid)]
    for pid in killed:
        log.warning("killed worker %d of %s left by the previous daemon", pid, groups[pid])
    deadline = time.monotonic() + grace
    left = killed
    while left and time.monotonic() < deadline:
        time.sleep(0.01)
        left = [pid for pid in left if _end(pid)]
    for pid in left:
        log.error(
            "worker %d of %s left by the previous daemon is still there %.0fs after SIGKILL",
            pid,
            groups[pid],
            grace,
        )
    for f in d.iterdir():
        f.unlink(missing_ok=True)
    return len(killed)
