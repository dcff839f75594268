"""Housekeeping: prune terminal executions older than a cut-off, with their history, steps,
start requests and waiter rows. Effect records are never pruned (RFC 004), and an execution
with a child that has not ended is kept (the child's parent link must keep pointing at it)."""

from __future__ import annotations

import sqlite3

BATCH = 500


def candidates(c: sqlite3.Connection, cutoff: float, limit: int = 100_000) -> list[str]:
    rows = c.execute(
        "SELECT e.execution_id FROM executions e WHERE e.status IN "
        "('completed','failed','cancelled') AND e.updated_at < ? AND NOT EXISTS ("
        "SELECT 1 FROM executions ch WHERE ch.parent_id = e.execution_id AND ch.status NOT IN "
        "('completed','failed','cancelled')) ORDER BY e.updated_at LIMIT ?",
        (cutoff, limit),
    ).fetchall()
    return [r[0] for r in rows]


def prune_tx(c: sqlite3.Connection, ids: list[str]) -> int:
    """Delete these executions and what belongs only to them (one batch, one transaction)."""
    n = 0
    for execution_id in ids:
        row = c.execute("SELECT status FROM executions WHERE execution_id=?",
                        (execution_id,)).fetchone()
        if row is None or row[0] not in ("completed", "failed", "cancelled"):
            continue  # changed since it was chosen
        for table, column in (("events", "execution_id"), ("steps", "execution_id"),
                              ("start_requests", "caller_id"), ("kv_waiters", "execution_id"),
                              ("effect_waiters", "execution_id")):
            c.execute(f"DELETE FROM {table} WHERE {column}=?", (execution_id,))
        c.execute("DELETE FROM executions WHERE execution_id=?", (execution_id,))
        n += 1
    return n
