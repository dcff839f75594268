"""Housekeeping: prune terminal executions older than a cut-off, with their history, steps,
start requests and waiter rows. Effect records are never pruned (RFC 004), and an execution
with a child that has not ended is kept (the child's parent link must keep pointing at it).

`HousekeepingMethods` (gc and the settings table) is mixed into `SqliteStore`."""

from __future__ import annotations

import sqlite3

from ys.store.db import MethodGroup

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


def prune_event_log_tx(c: sqlite3.Connection) -> int:
    """Drop the event log's positions of events gc pruned (after the batches: one pass, each
    row checked by the events' primary key, instead of an index kept at every event)."""
    return c.execute(
        "DELETE FROM event_log WHERE NOT EXISTS (SELECT 1 FROM events e WHERE "
        "e.execution_id = event_log.execution_id AND e.seq = event_log.seq)"
    ).rowcount


class HousekeepingMethods(MethodGroup):
    """SqliteStore's housekeeping: pruning, and the daemon's settings."""

    def gc(self, older_than: float, *, dry_run: bool = False,
           now: float | None = None) -> list[str]:
        """Prune terminal executions last changed more than `older_than` seconds ago; returns
        their IDs (what would go, with dry_run). Effect records always stay."""
        cutoff = self._now(now) - older_than
        ids = candidates(self.reader(), cutoff)
        if dry_run:
            return ids
        for i in range(0, len(ids), BATCH):
            batch = ids[i:i + BATCH]
            self.write(lambda c, b=batch: prune_tx(c, b))  # type: ignore[misc]
        if ids:
            self.write(prune_event_log_tx)
        return ids

    def setting(self, key: str) -> str | None:
        row = self.reader().execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else None

    def set_setting(self, key: str, value: str) -> None:
        self.write(lambda c: c.execute(
            "INSERT INTO settings (key, value) VALUES (?,?) ON CONFLICT (key) DO UPDATE SET "
            "value=excluded.value", (key, value)))
