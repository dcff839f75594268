"""Reads for the dashboard (`ys ui`, `ys top`): what runs, what is due, what failed lately,
executions found by ID prefix or age, durable values' waiters, and the file's size.

Every query is bounded and walks an index, so a page costs the same with a million
executions as with ten: running and failed executions through `executions_status` and
`executions_failed`, due ones through `executions_due`, an ID prefix through the primary key,
`since` through `executions_admitted`. `SqliteOverview` is the client that runs them.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from ys.errors import InvalidArgument
from ys.store import sql_charts
from ys.store.base import Page, RunningExecution
from ys.store.paging import check_limit, list_token, parse_list_token
from ys.store.records import STATUSES, Record
from ys.store.sqlite.core import Core
from ys.store.sqlite.executions import _FULL, row_to_record

# Past this many executions under one ID prefix, walking the newest-first index and skipping
# the others is quicker than sorting every match.
PREFIX_SORT_MAX = 2000


def _records(c: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> list[Record]:
    return [row_to_record(r) for r in c.execute(sql, args).fetchall()]


def running(c: sqlite3.Connection, limit: int = 100) -> list[RunningExecution]:
    rows = c.execute(
        f"SELECT {_FULL}, lease_expires_at, (SELECT at FROM events e WHERE "
        "e.execution_id = x.execution_id AND e.kind = 'claimed' ORDER BY seq DESC LIMIT 1) "
        "FROM executions x WHERE status = 'running' ORDER BY admitted_at LIMIT ?",
        (limit,),
    ).fetchall()
    return [RunningExecution(row_to_record(r[:-2]), r[-1], r[-2]) for r in rows]


def due(c: sqlite3.Connection, limit: int = 10) -> list[Record]:
    """Executions with a pending wake and no delivery, soonest first (overdue ones too: they
    wait for a free slot or for their script; not those waiting for a concurrency slot)."""
    return _records(
        c,
        f"SELECT {_FULL} FROM executions WHERE due_at IS NOT NULL AND lease_token IS NULL "
        "AND slot_wait IS NULL ORDER BY due_at LIMIT ?",
        (limit,),
    )


def failed_since(c: sqlite3.Connection, since: float, limit: int = 20) -> list[Record]:
    """Executions that failed at or after `since`, the latest first."""
    return _records(
        c,
        f"SELECT {_FULL} FROM executions INDEXED BY executions_failed WHERE status = 'failed' "
        "AND updated_at >= ? ORDER BY updated_at DESC LIMIT ?",
        (since, limit),
    )


def count_status(c: sqlite3.Connection, status: str, limit: int = 100_000) -> int:
    """How many executions have `status`, counted up to `limit` (a bounded index range)."""
    row = c.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM executions WHERE status = ? LIMIT ?)",
        (status, limit),
    ).fetchone()
    return int(row[0])


def _prefix_end(prefix: str) -> str:
    """The least text greater than every text that starts with `prefix`."""
    return prefix + "\U0010ffff"


def find(
    c: sqlite3.Connection,
    *,
    statuses: list[str] | None = None,
    workflow: str | None = None,
    id_prefix: str | None = None,
    since: float | None = None,
    limit: int = 50,
    page_token: str | None = None,
) -> Page:
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
        args.extend([id_prefix, _prefix_end(id_prefix)])
        few = (
            c.execute(
                "SELECT COUNT(*) FROM (SELECT 1 FROM executions WHERE execution_id >= ? AND "
                "execution_id < ? LIMIT ?)",
                (id_prefix, _prefix_end(id_prefix), PREFIX_SORT_MAX),
            ).fetchone()[0]
            < PREFIX_SORT_MAX
        )
        # Few matches: read them by key and sort them. Many (and no status to narrow them):
        # walk the newest-first index and skip the others.
        if few:
            index = "INDEXED BY sqlite_autoindex_executions_1"
        elif not statuses:
            index = "INDEXED BY executions_admitted"
    if since is not None:
        where.append("admitted_at >= ?")
        args.append(since)
    if page_token:
        at, last_id = parse_list_token(page_token)
        where.append("(admitted_at < ? OR (admitted_at = ? AND execution_id > ?))")
        args.extend([at, at, last_id])
    sql = f"SELECT {_FULL} FROM executions {index}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY admitted_at DESC, execution_id ASC LIMIT ?"
    records = _records(c, sql, (*args, limit + 1))
    nxt = None
    if len(records) > limit:
        records = records[:limit]
        nxt = list_token(records[-1].admitted_at, records[-1].execution_id)
    return Page(records, nxt)


def value_waiters(c: sqlite3.Connection, limit: int = 1000) -> list[dict[str, Any]]:
    """Who waits on which durable value, by key."""
    return [
        {"key": r[0], "execution_id": r[1], "step_key": r[2], "seen_version": r[3], "since": r[4]}
        for r in c.execute(
            "SELECT key, execution_id, step_key, seen_version, registered_at FROM kv_waiters "
            "ORDER BY key, registered_at LIMIT ?",
            (limit,),
        ).fetchall()
    ]


def database(c: sqlite3.Connection, path: str) -> dict[str, Any]:
    """The file, its size on disk (with the write-ahead log) and its schema version."""
    size = 0
    for suffix in ("", "-wal"):
        try:
            size += os.stat(path + suffix).st_size
        except OSError:
            pass
    version = c.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
    return {"path": path, "bytes": size, "schema_version": int(version)}


class SqliteOverview:
    """The dashboard's reads of one SqliteStore: each is one bounded read."""

    def __init__(self, core: Core) -> None:
        self._reader = core.reader
        self._path = core.path

    def running(self, limit: int = 100) -> list[RunningExecution]:
        return running(self._reader(), limit)

    def due(self, limit: int = 10) -> list[Record]:
        return due(self._reader(), limit)

    def failed_since(self, since: float, limit: int = 20) -> list[Record]:
        return failed_since(self._reader(), since, limit)

    def count_status(self, status: str, limit: int = 100_000) -> int:
        return count_status(self._reader(), status, limit)

    def find(
        self,
        *,
        statuses: list[str] | None = None,
        workflow: str | None = None,
        id_prefix: str | None = None,
        since: float | None = None,
        limit: int = 50,
        page_token: str | None = None,
    ) -> Page:
        return find(
            self._reader(),
            statuses=statuses,
            workflow=workflow,
            id_prefix=id_prefix,
            since=since,
            limit=limit,
            page_token=page_token,
        )

    def value_waiters(self, limit: int = 1000) -> list[dict[str, Any]]:
        return value_waiters(self._reader(), limit)

    def database(self) -> dict[str, Any]:
        return database(self._reader(), self._path)

    def schedule_slots(
        self,
        name: str | None = None,
        *,
        since: float | None = None,
        outcomes: tuple[str, ...] | None = None,
        limit: int = 20,
    ) -> list[dict[str, Any]]:
        from ys.store.sqlite.slots import recent

        return recent(self._reader(), name, since=since, outcomes=outcomes, limit=limit)

    def activity(
        self, since: float, until: float, bucket: float, workflow: str | None = None
    ) -> list[dict[str, Any]]:
        sql, args = sql_charts.activity_args(since, until, bucket, workflow, hints=True)
        return sql_charts.activity_rows(self._reader().execute(sql, args).fetchall())

    def schedule_history(self, name: str, limit: int = 50) -> list[dict[str, Any]]:
        rows = self._reader().execute(sql_charts.SCHEDULE_HISTORY, (name, limit)).fetchall()
        return sql_charts.history_rows(rows)
