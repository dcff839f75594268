"""Recovery, a named step at daemon start (after a crash, a kill -9, or a reboot).

1. kill_orphans (ys.daemon.orphans, which keeps the workers' pid files): what workers of a
   previous daemon still run is killed (each worker's whole group and session, its leader
   alive or not), and the daemon waits until it is gone, so no execution ever runs in two
   workers at once (the new daemon holds the lock, so the old one is gone). Workers end
   themselves when their daemon goes (ys.guard); this is for what could not.
2. recover: every lease this daemon held is released (on a shared PostgreSQL database, only
   this daemon's), each with an event that says why; the due executions are then claimed by
   the dispatcher as usual.
"""

from __future__ import annotations

import logging

from ys.paths import Paths
from ys.store.protocols import Store

log = logging.getLogger("ys.recovery")


def recover(store: Store, paths: Paths) -> dict[str, int]:
    """Release every lease a previous daemon held; report what is due."""
    now = store.clock()
    # On a shared database (PostgreSQL) only the leases this daemon held are released; other
    # daemons' expired ones are swept by claims, never by a start.
    released = len(store.release_held(now))
    due, waiting = store.due_counts(now)
    log.info(
        "recovery: %d leases released, %d executions due now, %d waiting for a timer",
        released,
        due,
        waiting,
    )
    return {"released": released, "due": due, "waiting": waiting}
