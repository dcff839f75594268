"""Reads for the dashboard (`ys ui`, `ys top`): what runs, what is due, what failed lately,
executions found by ID prefix or age, durable values' waiters, and the file's size.

Every query is bounded and walks an index, so a page costs the same with a million
executions as with ten: running and failed executions through `executions_status` and
`executions_failed`, due ones through `executions_due`, an ID prefix through the primary key,
`since` through `executions_admitted`. Where the engine's planner needs telling which index
(SQLite), the dialect names it (`indexed_by`, `prefix_index`). `Overview` runs them.
"""

from __future__ import annotations

from typing import Any

from ys.errors import InvalidArgument
from ys.store.base import Page, RunningExecution, ValueWaiter
from ys.store.paging import check_limit, list_token, parse_list_token
from ys.store.reading import ActivityBucket, DatabaseInfo, HourDurations, SlotHistory
from ys.store.records import STATUSES, Record
from ys.store.sql import charts
from ys.store.sql.core import Core
from ys.store.sql.lists import prefix_end
from ys.store.sql.rows import FULL, row_to_record


def _records(c: Any, sql: str, args: tuple[Any, ...]) -> list[Record]:
    return [row_to_record(r) for r in c.execute(sql, args).fetchall()]


def running(c: Any, limit: int = 100) -> list[RunningExecution]:
    rows = c.execute(
        f"SELECT {FULL}, lease_expires_at, (SELECT at FROM events e WHERE "
        "e.execution_id = x.execution_id AND e.kind = 'claimed' ORDER BY seq DESC LIMIT 1) "
        "FROM executions x WHERE status = 'running' ORDER BY admitted_at LIMIT ?",
        (limit,),
    ).fetchall()
    return [RunningExecution(row_to_record(r[:-2]), r[-1], r[-2]) for r in rows]


def due(c: Any, limit: int = 10) -> list[Record]:
    """Executions with a pending wake and no delivery, soonest first (overdue ones too: they
    wait for a free slot or for their script; not those waiting for a concurrency slot)."""
    return _records(
        c,
        f"SELECT {FULL} FROM executions WHERE due_at IS NOT NULL AND lease_token IS NULL "
        "AND slot_wait IS NULL ORDER BY due_at LIMIT ?",
        (limit,),
    )


def failed_since(c: Any, since: float, limit: int = 20) -> list[Record]:
    """Executions that failed at or after `since`, the latest first."""
    return _records(
        c,
        f"SELECT {FULL} FROM executions{c.dialect.indexed_by('executions_failed')} "
        "WHERE failed_at >= ? ORDER BY failed_at DESC LIMIT ?",
        (since, limit),
    )


def count_status(c: Any, status: str, limit: int = 100_000) -> int:
    """How many executions have `status`, counted up to `limit` (a bounded index range)."""
    row = c.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM executions WHERE status = ? LIMIT ?) AS t",
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
) -> Page[Record]:
    """Executions newest admitted first (ties by ID), filtered, a page at a time; the same
    order and page tokens as `list`."""
    limit = check_limit(limit)
    where: list[str] = []
    args: list[Any] = []
    if statuses:
        bad = [s for s in statuses if s not in STATUSES]
        if bad:
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"unknown status {bad[0]!r}; use one of {', '.join(STATUSES)}"
            )
        where.append(f"status IN ({','.join('?' * len(statuses))})")
        args.extend(statuses)
    if workflow:
        where.append("workflow = ?")
        args.append(workflow)
    index = ""
    if id_prefix:
        where.append("execution_id >= ? AND execution_id < ?")
        args.extend([id_prefix, prefix_end(id_prefix)])
        index = c.dialect.prefix_index(c, id_prefix, bool(statuses))
    if since is not None:
        where.append("admitted_at >= ?")
        args.append(since)
    if page_token:
        at, last_id = parse_list_token(page_token)
        where.append("(admitted_at < ? OR (admitted_at = ? AND execution_id > ?))")
        args.extend([at, at, last_id])
    sql = f"SELECT {FULL} FROM executions{index}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY admitted_at DESC, execution_id ASC LIMIT ?"
    records = _records(c, sql, (*args, limit + 1))
    nxt = None
    if len(records) > limit:
        records = records[:limit]
        nxt = list_token(records[-1].admitted_at, records[-1].execution_id)
    return Page(records, nxt)


def value_waiters(c: Any, limit: int = 1000) -> list[ValueWaiter]:
    """Who waits on which durable value, by key."""
    return [
        ValueWaiter(*r)
        for r in c.execute(
            "SELECT key, execution_id, step_key, seen_version, registered_at FROM kv_waiters "
            "ORDER BY key, registered_at LIMIT ?",
            (limit,),
        ).fetchall()
    ]


class Overview:
    """The dashboard's reads of one store: each is one bounded read."""

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

    def find(
        self,
        *,
        statuses: list[str] | None = None,
        workflow: str | None = None,
        id_prefix: str | None = None,
        since: float | None = None,
        limit: int = 50,
        page_token: str | None = None,
    ) -> Page[Record]:
        return self._core.read(
            lambda c: find(
                c,
                statuses=statuses,
                workflow=workflow,
                id_prefix=id_prefix,
                since=since,
                limit=limit,
                page_token=page_token,
            )
        )

    def value_waiters(self, limit: int = 1000) -> list[ValueWaiter]:
        return self._core.read(lambda c: value_waiters(c, limit))

    def database(self) -> DatabaseInfo:
        """The database's location (a URL without its password), size and schema version."""
        return self._core.read(self._core.database)

    def activity(
        self, since: float, until: float, bucket: float, workflow: str | None = None
    ) -> list[ActivityBucket]:
        return self._core.read(lambda c: charts.activity(c, since, until, bucket, workflow))

    def activity_by_workflow(
        self, since: float, until: float, bucket: float
    ) -> dict[str, list[ActivityBucket]]:
        return self._core.read(lambda c: charts.activity_by_workflow(c, since, until, bucket))

    def delivery_durations(self, since: float, until: float) -> list[HourDurations]:
        return self._core.read(lambda c: charts.durations(c, since, until))

    def schedule_history(self, name: str, limit: int = 50) -> list[SlotHistory]:
        return self._core.read(lambda c: charts.schedule_history(c, name, limit))
