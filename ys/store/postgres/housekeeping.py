"""Housekeeping on PostgreSQL: pruning (safe while other daemons run), the daemon settings,
recovery's queries and `ys doctor`'s checks (`health`).

Recovery at start releases only the leases this daemon held (`held_leases` names them by
the lease holder); another daemon's expired leases are swept by claims, never by a start.
"""

from __future__ import annotations

from typing import Any

from ys.store.postgres import schema
from ys.store.postgres.core import Core
from ys.store.sql.reads import verify

BATCH = 500
TERMINAL_SQL = "('completed','failed','cancelled')"


def candidates(c: Any, cutoff: float, limit: int = 100_000) -> list[str]:
    rows = c.execute(
        f"SELECT e.execution_id FROM executions e WHERE e.status IN {TERMINAL_SQL} "
        "AND e.updated_at < %s AND NOT EXISTS (SELECT 1 FROM executions ch WHERE "
        f"ch.parent_id = e.execution_id AND ch.status NOT IN {TERMINAL_SQL}) "
        "ORDER BY e.updated_at LIMIT %s",
        (cutoff, limit),
    ).fetchall()
    return [r[0] for r in rows]


def prune_tx(c: Any, ids: list[str]) -> int:
    """Delete these executions and what belongs only to them. Each row is locked and checked
    again first: another daemon may have changed it since it was chosen."""
    n = 0
    for execution_id in ids:
        row = c.execute(
            "SELECT status FROM executions WHERE execution_id=%s FOR UPDATE", (execution_id,)
        ).fetchone()
        if row is None or row[0] not in ("completed", "failed", "cancelled"):
            continue
        for table, column in (
            ("events", "execution_id"),
            ("steps", "execution_id"),
            ("start_requests", "caller_id"),
            ("kv_waiters", "execution_id"),
            ("effect_waiters", "execution_id"),
            ("execution_tags", "execution_id"),
            ("delivery_logs", "execution_id"),
        ):
            c.execute(f"DELETE FROM {table} WHERE {column}=%s", (execution_id,))
        c.execute("DELETE FROM executions WHERE execution_id=%s", (execution_id,))
        n += 1
    return n


def prune_event_log_tx(c: Any) -> int:
    """Drop the event log's positions of events gc pruned (one pass after the batches, each
    row checked by the events' primary key). Positions are never drawn again (a sequence)."""
    return int(
        c.execute(
            "DELETE FROM event_log l WHERE NOT EXISTS (SELECT 1 FROM events e WHERE "
            "e.execution_id = l.execution_id AND e.seq = l.seq)"
        ).rowcount
    )


class PgHousekeeping:
    """Housekeeping of one PostgresStore."""

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
        return ids

    def setting(self, key: str) -> str | None:
        row = self._core.read(
            lambda c: c.execute("SELECT value FROM settings WHERE key=%s", (key,)).fetchone()
        )
        return str(row[0]) if row else None

    def set_setting(self, key: str, value: str) -> None:
        self._core.write(
            lambda c: c.execute(
                "INSERT INTO settings (key, value) VALUES (%s,%s) ON CONFLICT (key) DO UPDATE SET "
                "value=excluded.value",
                (key, value),
            )
        )

    def held_leases(self) -> list[tuple[str, str]]:
        """(execution ID, token) of every lease this daemon (its holder name) holds, expired
        or not: what recovery releases at start."""
        rows = self._core.read(
            lambda c: c.execute(
                "SELECT execution_id, lease_token FROM executions WHERE lease_token IS NOT NULL "
                "AND lease_holder = %s",
                (self._core.holder,),
            ).fetchall()
        )
        return [(r[0], r[1]) for r in rows]

    def lease_holders(self, execution_ids: list[str]) -> dict[str, str]:
        """Which daemon holds each of these executions' leases: "daemon ID, daemon pid N"."""
        rows = self._core.read(
            lambda c: c.execute(
                "SELECT execution_id, lease_holder, lease_pid FROM executions "
                "WHERE execution_id = ANY(%s) AND lease_token IS NOT NULL",
                (list(execution_ids),),
            ).fetchall()
        )
        return {r[0]: f"daemon {r[1]}, daemon pid {r[2]}" for r in rows}

    def release_held(self, now: float | None = None) -> list[str]:
        """Recovery at start: release the leases this daemon held before it stopped."""
        t = self._core.now(now)
        holder = self._core.holder
        return self._core.write(lambda c: release_held_tx(c, holder, t))

    def due_counts(self, now: float) -> tuple[int, int]:
        due, waiting = self._core.read(
            lambda c: c.execute(
                "SELECT COUNT(*) FILTER (WHERE due_at <= %s), COUNT(*) FILTER (WHERE due_at > %s) "
                "FROM executions WHERE due_at IS NOT NULL AND slot_wait IS NULL",
                (now, now),
            ).fetchone()
        )
        return int(due), int(waiting)

    def verify(self) -> list[str]:
        return self._core.snapshot(verify)

    def health(self) -> Any:
        """Schema, row counts and re-folded histories, in one snapshot, never written."""
        from ys.settings import redact
        from ys.store.protocols import Health

        location = redact(self._core.url)

        def read(c: Any) -> Any:
            version = schema.version(c)
            present = {
                r[0]
                for r in c.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                )
            }
            rows = {
                t: int(c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                for t in schema.TABLES
                if t in present
            }
            return Health(
                location,
                [],
                schema_version=version,
                schema_expected=len(schema.MIGRATIONS),
                missing_tables=sorted(set(schema.TABLES) - present),
                rows=rows,
                mismatches=verify(c) if "executions" in present else [],
                executions=rows.get("executions", 0),
            )

        try:
            return self._core.snapshot(read)
        except Exception as exc:
            return Health(location, [], error=str(exc))


def release_held_tx(c: Any, holder: str, now: float) -> list[str]:
    """Release every lease `holder` holds, expired or not, each with a `released` event: a
    restarted daemon's recovery. Other daemons' leases are not touched (their expired ones
    are swept by claims). Executions that waited for a concurrency slot are claimable again:
    the next claim, under the limits of the scripts as they are now, marks again those that
    still wait."""
    from ys.store.records import RELEASED, Event
    from ys.store.sql.executions import append, load

    rows = c.execute(
        "SELECT execution_id FROM executions WHERE lease_token IS NOT NULL AND lease_holder=%s "
        "ORDER BY execution_id FOR UPDATE",
        (holder,),
    ).fetchall()
    for (execution_id,) in rows:
        record = load(c, execution_id, payload=False, lock=True)
        assert record is not None
        append(
            c,
            record,
            [Event(RELEASED, now, {"reason": "daemon_restarted", "retry_at": now})],
            clear_lease=True,
        )
    from ys.store.sql.concurrency import release_all_waiters

    release_all_waiters(c)  # this daemon's limits may have changed while it was down
    return [r[0] for r in rows]
