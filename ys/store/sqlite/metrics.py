"""What the metrics read from the database (the figures every daemon on it shares), without a
scan: counts come from the tables that schema migration 8's triggers keep, due executions from
the partial index on due_at, those waiting for their script from the live ones (the status
index). `GET /v1/metrics` (ys/daemon/metrics.py) turns them into Prometheus families."""

from __future__ import annotations

import sqlite3

from ys.store.base import SharedCounts
from ys.store.sqlite.versions import count_script_waits


def shared_counts(c: sqlite3.Connection, now: float) -> SharedCounts:
    """One read transaction, so the figures agree with each other."""
    c.execute("BEGIN")
    try:
        executions = {
            (w, s): n
            for w, s, n in c.execute("SELECT workflow, status, n FROM execution_counts WHERE n > 0")
        }
        effects = dict(c.execute("SELECT status, n FROM effect_counts WHERE n > 0").fetchall())
        due, oldest = c.execute(
            "SELECT COUNT(*), MIN(due_at) FROM executions "
            "WHERE due_at IS NOT NULL AND due_at <= ? AND lease_token IS NULL AND slot_wait IS NULL",
            (now,),
        ).fetchone()
        script_waiting = count_script_waits(c)
    finally:
        c.execute("COMMIT")
    return SharedCounts(executions, effects, int(due), oldest, script_waiting)
