"""Housekeeping: prune terminal executions older than a cut-off, with their history, steps,
start requests and waiter rows. Effect records are never pruned (RFC 004), and an execution
with a child that has not ended is kept (the child's parent link must keep pointing at it).

`SqliteHousekeeping` also holds the daemon's settings, recovery's queries (held leases, what
is due) and `ys doctor`'s checks of the file (`health`)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from ys.store.protocols import Health
from ys.store.sql import reads
from ys.store.sqlite.core import Core
from ys.store.sqlite.schema import MIGRATIONS

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
        row = c.execute(
            "SELECT status FROM executions WHERE execution_id=?", (execution_id,)
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


def prune_event_log_tx(c: sqlite3.Connection) -> int:
    """Drop the event log's positions of events gc pruned (after the batches: one pass, each
    row checked by the events' primary key, instead of an index kept at every event)."""
    return c.execute(
        "DELETE FROM event_log WHERE NOT EXISTS (SELECT 1 FROM events e WHERE "
        "e.execution_id = event_log.execution_id AND e.seq = event_log.seq)"
    ).rowcount


def release_held_tx(c: sqlite3.Connection, now: float) -> list[str]:
    """Release every lease held, expired or not, each with a `released` event: a restarted
    daemon's recovery (the file has one daemon, so every lease was its own). Executions that
    waited for a concurrency slot are claimable again: the next claim, under the limits of
    the scripts as they are now, marks again those that still wait."""
    from ys.store.records import RELEASED, Event
    from ys.store.sql.executions import append, load

    ids = [
        r[0]
        for r in c.execute(
            "SELECT execution_id FROM executions WHERE lease_token IS NOT NULL "
            "ORDER BY execution_id"
        ).fetchall()
    ]
    for execution_id in ids:
        record = load(c, execution_id, payload=False)
        assert record is not None
        released = Event(RELEASED, now, {"reason": "daemon_restarted", "retry_at": now})
        append(c, record, [released], clear_lease=True)
    from ys.store.sql.concurrency import release_all_waiters

    release_all_waiters(c)  # the limits may have changed while no daemon ran
    return ids


def health(c: sqlite3.Connection, location: str) -> Health:
    """Integrity, schema, row counts and re-folded histories, in one read snapshot (the
    daemon may go on writing meanwhile)."""
    import sqlite_utils  # its introspection lists the tables and counts their rows

    files = [
        p for p in (Path(location), Path(f"{location}-wal"), Path(f"{location}-shm")) if p.exists()
    ]
    try:
        integrity = [str(r[0]) for r in c.execute("PRAGMA integrity_check")]
        c.execute("BEGIN")
        try:
            mismatches = reads.verify(c)
            count = int(c.execute("SELECT COUNT(*) FROM executions").fetchone()[0])
            rows = {t.name: int(t.count) for t in sqlite_utils.Database(c).tables}
            version = int(
                c.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
            )
        finally:
            c.execute("COMMIT")
    except sqlite3.Error as exc:
        return Health(location, files, error=str(exc))
    expected = {m for script in MIGRATIONS for m in re.findall(r"CREATE TABLE (\w+)", script)}
    return Health(
        location,
        files,
        integrity=[] if integrity == ["ok"] else integrity,
        schema_version=version,
        schema_expected=len(MIGRATIONS),
        missing_tables=sorted(expected - set(rows)),
        rows=rows,
        mismatches=mismatches,
        executions=count,
    )


class SqliteHousekeeping:
    """Housekeeping of one SqliteStore: pruning, settings, recovery's and doctor's queries."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def gc(
        self, older_than: float, *, dry_run: bool = False, now: float | None = None
    ) -> list[str]:
        cutoff = self._core.now(now) - older_than
        ids = candidates(self._core.reader(), cutoff)
        if dry_run:
            return ids
        for i in range(0, len(ids), BATCH):
            batch = ids[i : i + BATCH]
            self._core.write(lambda c, b=batch: prune_tx(c, b))  # type: ignore[misc]
        if ids:
            self._core.write(prune_event_log_tx)
        return ids

    def setting(self, key: str) -> str | None:
        row = (
            self._core.reader().execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()
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

    def held_leases(self) -> list[tuple[str, str]]:
        rows = (
            self._core.reader()
            .execute(
                "SELECT execution_id, lease_token FROM executions WHERE lease_token IS NOT NULL"
            )
            .fetchall()
        )
        return [(r[0], r[1]) for r in rows]

    def release_held(self, now: float | None = None) -> list[str]:
        t = self._core.now(now)
        return self._core.write(lambda c: release_held_tx(c, t))

    def lease_holders(self, execution_ids: list[str]) -> dict[str, str]:
        return {}  # one daemon owns the file: every lease is its own

    def due_counts(self, now: float) -> tuple[int, int]:
        due, waiting = (
            self._core.reader()
            .execute(
                "SELECT COUNT(*) FILTER (WHERE due_at <= ?), COUNT(*) FILTER (WHERE due_at > ?) "
                "FROM executions WHERE due_at IS NOT NULL AND slot_wait IS NULL",
                (now, now),
            )
            .fetchone()
        )
        return int(due), int(waiting)

    def verify(self) -> list[str]:
        return reads.verify(self._core.reader())

    def health(self) -> Health:
        return health(self._core.reader(), self._core.path)
