"""List pages and what describe derives from a history, engine-neutral: the SQL of one list
page (`ph` is the connection's placeholder), a page of rows, deliveries and failed attempts."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ys.contract import check_execution_id, check_tags, check_time, check_workflow_name
from ys.errors import InvalidArgument
from ys.store.base import Page
from ys.store.eventdata import ClaimedData, Ending, ReleasedData, StepData, warnings_of
from ys.store.paging import check_limit, list_token, parse_list_token
from ys.store.reading import FailedAttempt, PastDelivery
from ys.store.records import STATUSES, Event, Record


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


def list_page(rows: list[Any], limit: int, to_record: Callable[[Any], Record]) -> Page[Record]:
    """A page of list rows (one more than `limit` read: whether a next page exists)."""
    limit = check_limit(limit)
    records = [to_record(r) for r in rows[:limit]]
    nxt = None
    if len(rows) > limit:
        last = records[-1]
        nxt = list_token(last.admitted_at, last.execution_id)
    return Page(records, nxt)


def deliveries(evs: list[Event]) -> list[PastDelivery]:
    """Each claim with when it ended and how, derived from the history."""
    out: list[PastDelivery] = []
    running = False  # the last of `out` has not ended yet
    for e in evs:
        d = e.data
        if isinstance(d, ClaimedData):
            out.append(PastDelivery(d.attempt, e.at, None, None, d.script_sha256))
            running = True
        elif running and isinstance(d, Ending):
            how, detail = e.kind, None
            if isinstance(d, ReleasedData):
                how, detail = f"retry ({d.reason})", d.detail or None
            out[-1] = dataclasses.replace(
                out[-1], ended_at=e.at, outcome=how, detail=detail, warnings=warnings_of(d)
            )
            running = False
    return out


def failed_attempts(evs: list[Event]) -> dict[str, list[FailedAttempt]]:
    """Each step's failed attempts, oldest first, from the history's step events that carry
    an error, by step key."""
    out: dict[str, list[FailedAttempt]] = {}
    for e in evs:
        d = e.data
        if isinstance(d, StepData) and d.error is not None:
            attempt = 1 if d.attempts is None else d.attempts
            out.setdefault(d.key, []).append(FailedAttempt(attempt, e.at, d.error))
    return out


def prefix_end(prefix: str) -> str:
    """The least text greater than every text that starts with `prefix`."""
    return prefix + "\U0010ffff"
