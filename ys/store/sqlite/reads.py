"""Reads of the SQLite store (`ReadClient`): records, history pages, lists, describe, what an
execution waits on, and verify (Housekeeping's). No writes here."""

from __future__ import annotations

import builtins
import dataclasses
import json
import sqlite3
from typing import Any

from ys.contract import check_execution_id, check_tags, check_time, check_workflow_name
from ys.errors import InvalidArgument, NotFoundError
from ys.store import sql_sched
from ys.store.base import DEFAULT_PAGE, Description, Page, StepRecord
from ys.store.paging import (
    check_limit,
    history_token,
    list_token,
    parse_history_token,
    parse_list_token,
)
from ys.store.records import STATUSES, Event, Record, fold, newest_retries
from ys.store.sqlite.core import Core
from ys.store.sqlite.executions import _FULL, STEP_COLUMNS, load, row_to_record


def _not_found(execution_id: str) -> NotFoundError:
    return NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")


# -- reads ----------------------------------------------------------------------------------


def events(
    c: sqlite3.Connection, execution_id: str, start: int = 1, limit: int = -1
) -> list[Event]:
    rows = c.execute(
        "SELECT at, kind, data FROM events WHERE execution_id=? AND seq >= ? ORDER BY seq LIMIT ?",
        (execution_id, start, limit),
    ).fetchall()
    return [Event(kind, at, json.loads(data)) for at, kind, data in rows]


def history(c: sqlite3.Connection, execution_id: str, limit: int, token: str | None) -> Page:
    limit = check_limit(limit)
    start = parse_history_token(token)
    length = c.execute(
        "SELECT history_length FROM executions WHERE execution_id=?", (execution_id,)
    ).fetchone()
    if length is None:
        raise _not_found(execution_id)
    # A token past the end (it may name any 64-bit number, more than SQLite's INTEGER
    # holds) is an empty last page, read without asking SQLite.
    evs = events(c, execution_id, start, limit) if start <= length[0] else []
    items = [
        {"seq": start + i, "at": e.at, "kind": e.kind, "data": e.data} for i, e in enumerate(evs)
    ]
    nxt = start + len(evs)
    return Page(items, history_token(nxt) if nxt <= length[0] else None)


def list_query(
    ph: str,
    columns: str,
    *,
    statuses: list[str] | None,
    workflow: str | None,
    parent: str | None,
    tags: dict[str, str] | None,
    since: float | None,
    until: float | None,
    limit: int,
    page_token: str | None,
) -> tuple[str, list[object]]:
    """The SQL of one list page (both adapters: `ph` is the placeholder, `columns` the record's
    columns of `e`), newest admitted first, ties by ID. With tags, the first tag's range of
    `execution_tags` drives the page in list order (an index range, however many executions
    there are), the others are checked per row; without, the executions' own indexes do."""
    limit = check_limit(limit)
    tag_items = list(check_tags(tags, "tag filter").items())
    if since is not None:
        since = check_time(since, "since")
    if until is not None:
        until = check_time(until, "until")
    where: list[str] = []
    args: list[object] = []
    if tag_items:
        order = "t"  # the table whose (admitted_at, execution_id) orders and pages the list
        key, value = tag_items[0]
        source = "execution_tags t JOIN executions e ON e.execution_id = t.execution_id"
        where.append(f"t.key = {ph} AND t.value = {ph}")
        args.extend([key, value])
        for key, value in tag_items[1:]:
            where.append(
                f"EXISTS (SELECT 1 FROM execution_tags t2 WHERE t2.key = {ph} AND "
                f"t2.value = {ph} AND t2.admitted_at = e.admitted_at AND "
                "t2.execution_id = e.execution_id)"
            )
            args.extend([key, value])
    else:
        order = "e"
        source = "executions e"
    if statuses:
        statuses = list(dict.fromkeys(statuses))  # a status given twice lists its rows once
        bad = [s for s in statuses if s not in STATUSES]
        if bad:
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"unknown status {bad[0]!r}; use one of {', '.join(STATUSES)}"
            )
        where.append(f"e.status IN ({','.join([ph] * len(statuses))})")
        args.extend(statuses)
    if workflow:
        check_workflow_name(workflow)  # (a NUL would be a server error on PostgreSQL)
        where.append(f"e.workflow = {ph}")
        args.append(workflow)
    if parent:
        check_execution_id(parent, "parent ID")
        where.append(f"e.parent_id = {ph}")
        args.append(parent)
    if since is not None:
        where.append(f"{order}.admitted_at >= {ph}")
        args.append(since)
    if until is not None:
        where.append(f"{order}.admitted_at < {ph}")
        args.append(until)
    if page_token:
        at, last_id = parse_list_token(page_token)
        # `admitted_at <= at` is the bound an index seeks to (the OR alone makes it scan from
        # the top: O(depth) per page); the rest leaves out what the last page showed.
        where.append(
            f"{order}.admitted_at <= {ph} AND ({order}.admitted_at < {ph} OR "
            f"({order}.admitted_at = {ph} AND {order}.execution_id > {ph}))"
        )
        args.extend([at, at, at, last_id])
    page_order = f" ORDER BY {order}.admitted_at DESC, {order}.execution_id ASC LIMIT {ph}"
    if statuses and len(statuses) > 1 and not tag_items:
        # Several statuses (`ys ps`: admitted, running, suspended): each one's first page is
        # read off its own range of executions_status, in list order, and the pages merged,
        # so a page costs O(page) however many executions have those statuses (an IN list
        # over one index would read and sort them all).
        # No tag filter: the status clause is the first, its arguments the first ones.
        assert where[0].startswith("e.status IN")
        others, rest = where[1:], args[len(statuses) :]
        parts: list[str] = []
        merged: list[object] = []
        for n, status in enumerate(statuses):
            conds = " AND ".join([f"e.status = {ph}", *others])
            parts.append(
                f"SELECT * FROM (SELECT {columns} FROM {source} WHERE {conds}{page_order}) AS s{n}"
            )
            merged += [status, *rest, limit + 1]
        sql = (
            f"SELECT * FROM ({' UNION ALL '.join(parts)}) AS u "
            f"ORDER BY u.admitted_at DESC, u.execution_id ASC LIMIT {ph}"
        )
        return sql, [*merged, limit + 1]
    sql = f"SELECT {columns} FROM {source}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += page_order
    args.append(limit + 1)
    return sql, args


def list_page(rows: list[Any], limit: int, to_record: Any) -> Page:
    """A page of list rows (one more than `limit` read: whether a next page exists)."""
    limit = check_limit(limit)
    records = [to_record(r) for r in rows[:limit]]
    nxt = None
    if len(rows) > limit:
        last = records[-1]
        nxt = list_token(last.admitted_at, last.execution_id)
    return Page(records, nxt)


# the record's columns, read off `e` (lists join the tag table)
E_FULL = ", ".join("e." + col.strip() for col in _FULL.split(","))


def list_executions(
    c: sqlite3.Connection,
    *,
    statuses: list[str] | None,
    workflow: str | None,
    parent: str | None,
    limit: int,
    page_token: str | None,
    tags: dict[str, str] | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Page:
    sql, args = list_query(
        "?",
        E_FULL,
        statuses=statuses,
        workflow=workflow,
        parent=parent,
        tags=tags,
        since=since,
        until=until,
        limit=limit,
        page_token=page_token,
    )
    return list_page(c.execute(sql, args).fetchall(), limit, row_to_record)


def steps(c: sqlite3.Connection, execution_id: str) -> list[StepRecord]:
    rows = c.execute(
        f"SELECT {STEP_COLUMNS} FROM steps WHERE execution_id=? ORDER BY first_seq",
        (execution_id,),
    ).fetchall()
    return [StepRecord(*r) for r in rows]


def deliveries(evs: list[Event]) -> list[dict[str, Any]]:
    """Each claim with when it ended and how, derived from the history."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for e in evs:
        if e.kind == "claimed":
            current = {
                "attempt": e.data.get("attempt"),
                "started_at": e.at,
                "ended_at": None,
                "outcome": None,
                "script_sha256": e.data.get("script_sha256"),
            }
            out.append(current)
        elif current is not None and e.kind in (
            "released",
            "suspended",
            "completed",
            "failed",
            "cancelled",
        ):
            current["ended_at"] = e.at
            current["outcome"] = (
                f"retry ({e.data.get('reason')})" if e.kind == "released" else e.kind
            )
            if e.kind == "released" and e.data.get("detail"):
                current["detail"] = e.data["detail"]
            current = None
    return out


def failed_attempts(evs: list[Event]) -> dict[str, list[dict[str, Any]]]:
    """Each step's failed attempts, oldest first, from the history's step events that carry
    an error: {"attempt", "at", "error"}, by step key."""
    out: dict[str, list[dict[str, Any]]] = {}
    for e in evs:
        if e.kind == "step" and isinstance(e.data.get("error"), dict):
            out.setdefault(e.data["key"], []).append(
                {"attempt": e.data.get("attempts", 1), "at": e.at, "error": e.data["error"]}
            )
    return out


def describe(c: sqlite3.Connection, execution_id: str) -> Description:
    c.execute("BEGIN")
    try:
        record = load(c, execution_id)
        if record is None:
            raise _not_found(execution_id)
        hb, lease = c.execute(
            "SELECT history_bytes, lease_expires_at FROM executions WHERE execution_id=?",
            (execution_id,),
        ).fetchone()
        children = [
            row_to_record(r)
            for r in c.execute(
                f"SELECT {_FULL} FROM executions WHERE parent_id=? ORDER BY admitted_at, execution_id",
                (execution_id,),
            ).fetchall()
        ]
        evs = events(c, execution_id)
        return Description(
            record=record,
            history_bytes=hb,
            steps=steps(c, execution_id),
            deliveries=deliveries(evs),
            children=children,
            lease_expires_at=lease,
            failed_attempts=failed_attempts(evs),
            retries=retries(c, execution_id),
        )
    finally:
        c.execute("COMMIT")


def retries(c: Any, execution_id: str) -> list[str]:
    """The executions that retry this one, oldest admitted first."""
    return [
        r[0]
        for r in c.execute(
            "SELECT execution_id FROM executions WHERE retry_of=? "
            "ORDER BY admitted_at, execution_id",
            (execution_id,),
        )
    ]


def verify(c: sqlite3.Connection) -> list[str]:
    """Re-fold every history and compare it with the stored record (each `retried_by` with
    the newest retry folded from the retries' histories); returns the mismatches."""
    problems = []
    linked: dict[str, str | None] = {}  # each record's stored retried_by
    retried: list[Record] = []  # the folded records that retry another
    ids = [r[0] for r in c.execute("SELECT execution_id FROM executions ORDER BY execution_id")]
    for execution_id in ids:
        stored = load(c, execution_id)
        evs = events(c, execution_id)
        try:
            folded = fold(evs)
        except (ValueError, KeyError) as exc:
            problems.append(f"{execution_id}: history does not fold: {exc}")
            continue
        if stored is None:  # removed (gc) since the IDs were read
            continue
        linked[execution_id] = stored.retried_by
        if folded.retry_of is not None:
            retried.append(folded)
        if dataclasses.replace(folded, retried_by=stored.retried_by) != stored:
            problems.append(f"{execution_id}: stored record differs from its folded history")
        seqs = [
            r[0]
            for r in c.execute(
                "SELECT seq FROM events WHERE execution_id=? ORDER BY seq", (execution_id,)
            )
        ]
        if seqs != list(range(1, len(seqs) + 1)):
            problems.append(f"{execution_id}: event numbers have gaps")
    newest = newest_retries(retried)
    for execution_id, by in linked.items():
        if by != newest.get(execution_id):
            problems.append(
                f"{execution_id}: retried_by is not its newest retry ({newest.get(execution_id)})"
            )
    return problems


def waits(c: sqlite3.Connection, execution_id: str) -> list[dict[str, Any]]:
    """What an execution waits on: store keys (oldest registration first), effects, then a
    concurrency slot."""
    out = [
        {"kind": "store", "key": r[0], "step_key": r[1], "since": r[2]}
        for r in c.execute(
            "SELECT key, step_key, registered_at FROM kv_waiters WHERE execution_id=? "
            "ORDER BY registered_at",
            (execution_id,),
        ).fetchall()
    ]
    out += [
        {"kind": "effect", "effect_id": r[0], "step_key": r[1], "wake_at": r[2]}
        for r in c.execute(
            "SELECT effect_id, step_key, wake_at FROM effect_waiters WHERE execution_id=?",
            (execution_id,),
        ).fetchall()
    ]
    out += [
        {"kind": "concurrency", "workflow": r[0], "slot": r[1]}
        for r in c.execute(
            "SELECT workflow, slot_wait FROM executions WHERE execution_id=? "
            "AND slot_wait IS NOT NULL AND due_at IS NOT NULL",
            (execution_id,),
        ).fetchall()
    ]
    return out


def next_due_at(c: sqlite3.Connection) -> float | None:
    row = c.execute(
        "SELECT MIN(t) FROM (SELECT MIN(due_at) AS t FROM executions WHERE due_at IS NOT NULL "
        "AND lease_token IS NULL AND slot_wait IS NULL "
        + sql_sched.SKIP_PAUSED  # a paused workflow's executions are not due for claims
        + "UNION ALL SELECT MIN(lease_expires_at) "
        "FROM executions WHERE lease_token IS NOT NULL UNION ALL SELECT MIN(deadline_at) "
        "FROM executions WHERE deadline_at IS NOT NULL)"
    ).fetchone()
    return row[0] if row else None


def next_deadline_at(c: sqlite3.Connection) -> float | None:
    row = c.execute(
        "SELECT MIN(deadline_at) FROM executions WHERE deadline_at IS NOT NULL"
    ).fetchone()
    return None if row is None or row[0] is None else float(row[0])


class SqliteReads:
    """The read client of one SqliteStore: each call reads on this thread's connection."""

    def __init__(self, core: Core) -> None:
        self._reader = core.reader

    def get(self, execution_id: str) -> Record | None:
        return load(self._reader(), execution_id)

    def list(
        self,
        *,
        statuses: builtins.list[str] | None = None,
        workflow: str | None = None,
        parent: str | None = None,
        limit: int = DEFAULT_PAGE,
        page_token: str | None = None,
        tags: dict[str, str] | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> Page:
        return list_executions(
            self._reader(),
            statuses=statuses,
            workflow=workflow,
            parent=parent,
            limit=limit,
            page_token=page_token,
            tags=tags,
            since=since,
            until=until,
        )

    def history(
        self, execution_id: str, limit: int = DEFAULT_PAGE, page_token: str | None = None
    ) -> Page:
        return history(self._reader(), execution_id, limit, page_token)

    def describe(self, execution_id: str) -> Description:
        return describe(self._reader(), execution_id)

    def steps(self, execution_id: str) -> builtins.list[StepRecord]:
        return steps(self._reader(), execution_id)

    def events(self, execution_id: str) -> builtins.list[Event]:
        return events(self._reader(), execution_id)

    def waits(self, execution_id: str) -> builtins.list[dict[str, Any]]:
        return waits(self._reader(), execution_id)

    def next_due_at(self) -> float | None:
        return next_due_at(self._reader())

    def next_times(self) -> tuple[float | None, float | None]:
        c = self._reader()
        c.execute("BEGIN")
        try:
            return next_due_at(c), next_deadline_at(c)
        finally:
            c.execute("COMMIT")

    def slot_waits(self, execution_ids: builtins.list[str]) -> dict[str, str]:
        from ys.store.sqlite.concurrency import waiting

        return waiting(self._reader(), execution_ids)
