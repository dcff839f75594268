"""Recovery, a named step at daemon start (after a crash, a kill -9, or a reboot).

1. kill_orphans: workers of a previous daemon that still run are killed, so no execution ever
   runs in two workers at once (the new daemon holds the lock, so the old one is gone).
2. recover: every lease still held is released, each with an event that says why (on a
   shared PostgreSQL database, only this daemon's); the due executions are then claimed by
   the dispatcher as usual.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

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
    d = _workers_dir(paths)
    d.mkdir(exist_ok=True, mode=0o700)
    (d / str(pid)).write_text(f"{_start_time(pid) or '-'} {execution_id}\n")


def forget_worker(paths: Paths, pid: int) -> None:
    try:
        (_workers_dir(paths) / str(pid)).unlink()
    except FileNotFoundError:
        pass


def kill_orphans(paths: Paths) -> int:
    d = _workers_dir(paths)
    if not d.is_dir():
        return 0
    killed = 0
    for f in d.iterdir():
        try:
            pid = int(f.name)
            started, _, execution_id = f.read_text().strip().partition(" ")
        except (ValueError, OSError):
            f.unlink(missing_ok=True)
            continue
        now_started = _start_time(pid)
        alive = now_started is not None and (started in ("-", now_started))
        if alive:
            try:
                os.killpg(pid, signal.SIGKILL)
                killed += 1
                log.warning("killed worker %d of %s left by the previous daemon", pid, execution_id)
            except (ProcessLookupError, PermissionError):
                pass
        f.unlink(missing_ok=True)
    return killed


def recover(store: Any, paths: Paths) -> dict[str, int]:
    """Release every lease a previous daemon held; report what is due."""
    now = time.time()
    release_held = getattr(store, "release_held", None)
    if release_held is not None:
        # A shared database (PostgreSQL): only the leases this daemon held are released;
        # other daemons' expired ones are swept by claims, never by a start.
        released = len(release_held(now))
        return _report(store, now, released)
    released = 0
    for execution_id, token in store.held_leases():
        try:
            store.release(execution_id, token, retry_at=now, reason="daemon_restarted", now=now)
            released += 1
        except Exception as exc:  # a lease that already expired is released by claim_due
            log.debug("%s: %s", execution_id, exc)
    released += len(store.release_expired(now))
    return _report(store, now, released)


def _report(store: Any, now: float, released: int) -> dict[str, int]:
    if hasattr(store, "due_counts"):
        due, waiting = store.due_counts(now)
        log.info("recovery: %d leases released, %d executions due now, %d waiting for a timer",
                 released, due, waiting)
        return {"released": released, "due": due, "waiting": waiting}
    due = store.reader().execute(
        "SELECT COUNT(*) FROM executions WHERE due_at IS NOT NULL AND due_at <= ?", (now,)
    ).fetchone()[0]
    waiting = store.reader().execute(
        "SELECT COUNT(*) FROM executions WHERE due_at > ?", (now,)
    ).fetchone()[0]
    log.info("recovery: %d leases released, %d executions due now, %d waiting for a timer",
             released, due, waiting)
    return {"released": released, "due": due, "waiting": waiting}
