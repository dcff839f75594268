"""The dashboard's reads on PostgreSQL (`ys ui`, `ys top`; ys/store/overview.py's meaning):
what runs, what is due, what failed lately, executions found by ID prefix or age, durable
values' waiters, and the database. Each is one bounded read through an index (running and
failed through executions_status and executions_failed, due through executions_due, an ID
prefix through the primary key, which sorts by bytes: COLLATE "C")."""

from __future__ import annotations

from typing import Any

from ys.errors import InvalidArgument
from ys.store import sql_charts
from ys.store.base import Page, RunningExecution
from ys.store.postgres.core import Core
from ys.store.postgres.executions import FULL, row_to_record
from ys.store.postgres.shared import check_limit, list_token, parse_list_token
from ys.store.postgres.shared import prefix_end as _prefix_end
from ys.store.records import STATUSES, Record


def _records(c: Any, sql: str, args: tuple[Any, ...]) -> list[Record]:
    return [row_to_record(r) for r in c.execute(sql, args).fetchall()]


def running(c: Any, limit: int = 100) -> list[RunningExecution]:
    rows = c.execute(
        f"SELECT {FULL}, lease_expires_at, (SELECT at FROM events e WHERE "
        "e.execution_id = x.execution_id AND e.kind = 'claimed' ORDER BY seq DESC LIMIT 1) "
        "FROM executions x WHERE status = 'running' ORDER BY admitted_at LIMIT %s",
        (limit,),
    ).fetchall()
    return [RunningExecution(row_to_record(r[:-2]), r[-1], r[-2]) for r in rows]


def due(c: Any, limit: int = 10) -> list[Record]:
    """Executions with a pending wake and no delivery, soonest first."""
    return _records(
        c,
        f"SELECT {FULL} FROM executions WHERE due_at IS NOT NULL AND lease_token IS NULL "
        "AND slot_wait IS NULL ORDER BY due_at LIMIT %s",
        (limit,),
    )


def failed_since(c: Any, since: float, limit: int = 20) -> list[Record]:
    """Executions that failed at or after `since`, the latest first."""
    return _records(
        c,
        f"SELECT {FULL} FROM executions WHERE status = 'failed' AND updated_at >= %s "
        "ORDER BY updated_at DESC LIMIT %s",
        (since, limit),
    )


def count_status(c: Any, status: str, limit: int = 100_000) -> int:
    """How many executions have `status`, counted up to `limit` (a bounded index range)."""
    row = c.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM executions WHERE status = %s LIMIT %s) t",
        (status, limit),
    ).fetchone()
    return int(row[0])


def find(
    c: Any,
    *,
    statuses: list[str] | None = None,
    workflow: str | None = None,
    id_prefix: str | None = None,
    since: float | None = None,
    limit: int = 50,
    page_token: str | None = None,
) -> Page:
    """Executions newest admitted first (ties by ID), filtered, a page at a time; the same
    order and page tokens as `list`. PostgreSQL's planner picks the index itself."""
    limit = check_limit(limit)
    where: list[str] = []
    args: list[Any] = []
    if statuses:
        bad = [s for s in statuses if s not in STATUSES]
        if bad:
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"unknown status {bad[0]!r}; use one of {', '.join(STATUSES)}"
            )
        where.append("status = ANY(%s)")
        args.append(list(statuses))
    if workflow:
        where.append("workflow = %s")
        args.append(workflow)
    if id_prefix:
        where.append("execution_id >= %s AND execution_id < %s")
        args.extend([id_prefix, _prefix_end(id_prefix)])
    if since is not None:
        where.append("admitted_at >= %s")
        args.append(since)
    if page_token:
        at, last_id = parse_list_token(page_token)
        where.append("(admitted_at < %s OR (admitted_at = %s AND execution_id > %s))")
        args.extend([at, at, last_id])
    sql = f"SELECT {FULL} FROM executions"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY admitted_at DESC, execution_id ASC LIMIT %s"
    records = _records(c, sql, (*args, limit + 1))
    nxt = None
    if len(records) > limit:
        records = records[:limit]
        nxt = list_token(records[-1].admitted_at, records[-1].execution_id)
    return Page(records, nxt)


def value_waiters(c: Any, limit: int = 1000) -> list[dict[str, Any]]:
    """Who waits on which durable value, by key."""
    return [
        {
            "key": r[0],
            "execution_id": r[1],
            "step_key": r[2],
            "seen_version": int(r[3]),
            "since": r[4],
        }
        for r in c.execute(
            "SELECT key, execution_id, step_key, seen_version, registered_at FROM kv_waiters "
            "ORDER BY key, registered_at LIMIT %s",
            (limit,),
        ).fetchall()
    ]


def database(c: Any, location: str) -> dict[str, Any]:
    """The database (its URL without a password), its size and its schema version."""
    size = c.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    version = c.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
    return {"path": location, "bytes": int(size), "schema_version": int(version)}


class PgOverview:
    """The dashboard's reads of one PostgresStore: each is one bounded read."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def running(self, limit: int = 100) -> list[RunningExecution]:
        return self._core.read(lambda c: running(c, limit))

    def due(self, limit: int = 10) -> list[Record]:
        return self._core.read(lambda c: due(c, limit))

    def failed_since(self, since: float, limit: int = 20) -> list[Record]:
        return self._core.read(lambda c: failed_since(c, since, limit))

    def count_status(self, status: str, limit: int = 100_000) -> int:
        return self._core.read(lambda c: count_status(c, status, limit))

    def find(self, **filters: Any) -> Page:
        return self._core.read(lambda c: find(c, **filters))

    def value_waiters(self, limit: int = 1000) -> list[dict[str, Any]]:
        return self._core.read(lambda c: value_waiters(c, limit))

    def database(self) -> dict[str, Any]:
        from ys.settings import redact

        location = redact(self._core.url)
        return self._core.read(lambda c: database(c, location))

    def activity(
        self, since: float, until: float, bucket: float, workflow: str | None = None
    ) -> list[dict[str, Any]]:
        sql, args = sql_charts.activity_args(since, until, bucket, workflow, hints=False)
        rows = self._core.read(lambda c: c.execute(sql_charts.pg(sql), args).fetchall())
        return sql_charts.activity_rows(rows)

    def schedule_history(self, name: str, limit: int = 50) -> list[dict[str, Any]]:
        sql = sql_charts.pg(sql_charts.SCHEDULE_HISTORY)
        rows = self._core.read(lambda c: c.execute(sql, (name, limit)).fetchall())
        return sql_charts.history_rows(rows)
