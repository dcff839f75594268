"""Housekeeping: prune terminal executions older than a cut-off, with their history, steps,
start requests and waiter rows. Effect records are never pruned, and an execution
with a child that has not ended is kept (the child's parent link must keep pointing at it).
The pictures' rollups (ys.store.sql.charts) keep their rows as long, and at least two days.
Pruning is safe while other daemons run (each row is locked and checked again).

`Housekeeping` also holds the daemon's settings (among them MOVED_TO, where `ys migrate` moved
the data: no daemon starts on a database that has it), recovery's queries (held leases, what is
due) and `ys doctor`'s checks (`health`, the adapter's: its core's). Recovery at start
releases only the leases this daemon held (where leases name their holder: `owned_leases`);
another daemon's expired leases are swept by claims, never by a start.
"""

from __future__ import annotations

from typing import Any

from ys.store.protocols import Health
from ys.store.sql import charts, reads
from ys.store.sql.core import Core

BATCH = 500
MOVED_TO = "moved_to"  # the settings key `ys migrate` sets on its source (docs/design.md)


def moved_to(c: Any) -> str | None:
    """Where `ys migrate` moved this database's data (its target, any password hidden), or
    None."""
    row = c.execute("SELECT value FROM settings WHERE key=?", (MOVED_TO,)).fetchone()
    return str(row[0]) if row else None


def candidates(c: Any, cutoff: float, limit: int = 100_000) -> list[str]:
    rows = c.execute(
        "SELECT e.execution_id FROM executions e WHERE e.status IN "
        "('completed','failed','cancelled') AND e.updated_at < ? AND NOT EXISTS ("
        "SELECT 1 FROM executions ch WHERE ch.parent_id = e.execution_id AND ch.status NOT IN "
        "('completed','failed','cancelled')) ORDER BY e.updated_at LIMIT ?",
        (cutoff, limit),
    ).fetchall()
    return [r[0] for r in rows]


def prune_tx(c: Any, ids: list[str]) -> int:
    """Delete these executions and what belongs only to them (one batch, one transaction).
    Each row is locked and checked again first: another daemon may have changed it since it
    was chosen."""
    n = 0
    for execution_id in ids:
        row = c.execute(
            "SELECT status FROM executions WHERE execution_id=?" + c.dialect.for_update,
            (execution_id,),
        ).fetchone()
        if row is None or row[0] not in ("completed", "failed", "cancelled"):
            continue  # changed since it was chosen
        for table, column in (
            ("events", "execution_id"),
            ("steps", "execution_id"),
            ("start_requests", "caller_id"),
            ("kv_waiters", "execution_id"),
            ("effect_waiters", "execution_id"),
            ("execution_tags", "execution_id"),
            ("delivery_logs", "execution_id"),
        ):
            c.execute(f"DELETE FROM {table} WHERE {column}=?", (execution_id,))
        c.execute("DELETE FROM executions WHERE execution_id=?", (execution_id,))
        n += 1
    return n


def prune_event_log_tx(c: Any) -> int:
    """Drop the event log's positions of events gc pruned (after the batches: one pass, each
    row checked by the events' primary key, instead of an index kept at every event)."""
    cur = c.execute(
        "DELETE FROM event_log WHERE NOT EXISTS (SELECT 1 FROM events e WHERE "
        "e.execution_id = event_log.execution_id AND e.seq = event_log.seq)"
    )
    return int(cur.rowcount)


def release_held_tx(c: Any, holder: str, now: float) -> list[str]:
    """Release every lease this daemon holds (`holder`'s, where leases name one; else every
    lease: the file has one daemon), expired or not, each with a `released` event: a
    restarted daemon's recovery, once its workers are known gone. A step attempt whose stored
    deadline passed is recorded as the daemon's timer would have (limits.release_events), and
    the slots its workers kept past their executions' ends free (concurrency.free_own_held).
    Executions that waited for a concurrency slot are claimable again: the next claim, under
    the limits of the scripts as they are now, marks again those that still wait."""
    from ys.store.sql.concurrency import free_own_held, release_all_waiters
    from ys.store.sql.executions import append, load
    from ys.store.sql.limits import release_events

    owned = c.dialect.owned_leases
    rows = c.execute(
        "SELECT execution_id FROM executions WHERE lease_token IS NOT NULL"
        + (" AND lease_holder=?" if owned else "")
        + " ORDER BY execution_id"
        + c.dialect.for_update,
        (holder,) if owned else (),
    ).fetchall()
    for (execution_id,) in rows:
        record = load(c, execution_id, payload=False, lock=True)
        assert record is not None
        events, _ = release_events(c, record, now, "daemon_restarted")
        append(c, record, events, clear_lease=True)
    free_own_held(c, holder)
    release_all_waiters(c)  # the limits may have changed while the daemon was down
    return [r[0] for r in rows]


class Housekeeping:
    """Housekeeping of one store: pruning, settings, recovery's and doctor's queries."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def gc(
        self, older_than: float, *, dry_run: bool = False, now: float | None = None
    ) -> list[str]:
        cutoff = self._core.now(now) - older_than
        ids = self._core.read(lambda c: candidates(c, cutoff))
        if dry_run:
            return ids
        for i in range(0, len(ids), BATCH):
            batch = ids[i : i + BATCH]
            self._core.write(lambda c, b=batch: prune_tx(c, b))  # type: ignore[misc]
        if ids:
            self._core.write(prune_event_log_tx)
        old = self._core.now(now) - max(older_than, charts.KEEP)
        self._core.write(lambda c: charts.prune_tx(c, old))
        return ids

    def setting(self, key: str) -> str | None:
        row = self._core.read(
            lambda c: c.execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()
        )
        return str(row[0]) if row else None

    def set_setting(self, key: str, value: str) -> None:
        self._core.write(
            lambda c: c.execute(
                "INSERT INTO settings (key, value) VALUES (?,?) ON CONFLICT (key) DO UPDATE SET "
                "value=excluded.value",
                (key, value),
            )
        )

    def moved_to(self) -> str | None:
        return self._core.read(moved_to)

    def mark_moved(self, target: str | None) -> None:
        if target is None:
            self._core.write(lambda c: c.execute("DELETE FROM settings WHERE key=?", (MOVED_TO,)))
        else:
            self.set_setting(MOVED_TO, target)

    def held_leases(self) -> list[tuple[str, str]]:
        """(execution ID, token) of every lease this daemon holds, expired or not: what
        recovery releases at start."""
        owned = self._core.dialect.owned_leases
        rows = self._core.read(
            lambda c: c.execute(
                "SELECT execution_id, lease_token FROM executions WHERE lease_token IS NOT NULL"
                + (" AND lease_holder = ?" if owned else ""),
                (self._core.holder,) if owned else (),
            ).fetchall()
        )
        return [(r[0], r[1]) for r in rows]

    def release_held(self, now: float | None = None) -> list[str]:
        """Recovery at start: release the leases this daemon held before it stopped."""
        t = self._core.now(now)
        holder = self._core.holder
        return self._core.write(lambda c: release_held_tx(c, holder, t))

    def lease_holders(self, execution_ids: list[str]) -> dict[str, str]:
        """Which daemon holds each of these executions' leases: "daemon ID, daemon pid N"
        (none where leases name no holder: one daemon owns the file)."""
        if not self._core.dialect.owned_leases or not execution_ids:
            return {}
        marks = ",".join("?" * len(execution_ids))
        rows = self._core.read(
            lambda c: c.execute(
                "SELECT execution_id, lease_holder, lease_pid FROM executions "
                f"WHERE execution_id IN ({marks}) AND lease_token IS NOT NULL",
                list(execution_ids),
            ).fetchall()
        )
        return {r[0]: f"daemon {r[1]}, daemon pid {r[2]}" for r in rows}

    def due_counts(self, now: float) -> tuple[int, int]:
        due, waiting = self._core.read(
            lambda c: c.execute(
                "SELECT COUNT(*) FILTER (WHERE due_at <= ?), COUNT(*) FILTER (WHERE due_at > ?) "
                "FROM executions WHERE due_at IS NOT NULL AND slot_wait IS NULL",
                (now, now),
            ).fetchone()
        )
        return int(due), int(waiting)

    def verify(self) -> list[str]:
        return self._core.snapshot(reads.verify)

    def health(self) -> Health:
        """`ys doctor`'s checks of the database, never written (the adapter's)."""
        health: Health = self._core.health()
        return health
