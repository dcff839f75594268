"""Reads (`ReadClient`): records, history pages, lists, describe, what an execution waits
on, and verify (Housekeeping's). No writes here. A read of several statements that must
agree (describe, a history page, verify) runs in one snapshot (`Core.snapshot`)."""

from __future__ import annotations

import builtins
import dataclasses
import json
from typing import Any

from ys.store.base import DEFAULT_PAGE, Description, Page, StepRecord
from ys.store.eventdata import stored_event_data
from ys.store.paging import check_limit, history_token, parse_history_token
from ys.store.reading import ConcurrencyWait, EffectWait, HistoryEvent, StoreWait, Wait
from ys.store.records import Event, Record, fold, newest_retries
from ys.store.sql import pauses
from ys.store.sql.core import Core
from ys.store.sql.executions import load, not_found
from ys.store.sql.lists import deliveries, failed_attempts, list_page, list_query
from ys.store.sql.rows import FULL, row_to_record
from ys.store.sql.steps import STEP_COLUMNS

MAX_SEQ = 2**63 - 1  # bigint: a token past it names no event


def events(c: Any, execution_id: str, start: int = 1, limit: int | None = None) -> list[Event]:
    rows = c.execute(
        "SELECT at, kind, data FROM events WHERE execution_id=? AND seq >= ? ORDER BY seq"
        + (" LIMIT ?" if limit is not None else ""),
        (execution_id, start) if limit is None else (execution_id, start, limit),
    ).fetchall()
    return [Event(kind, at, stored_event_data(kind, json.loads(data))) for at, kind, data in rows]


def history(c: Any, execution_id: str, limit: int, token: str | None) -> Page[HistoryEvent]:
    limit = check_limit(limit)
    start = parse_history_token(token)
    length = c.execute(
        "SELECT history_length FROM executions WHERE execution_id=?", (execution_id,)
    ).fetchone()
    if length is None:
        raise not_found(execution_id)
    evs = events(c, execution_id, start, limit) if start <= min(length[0], MAX_SEQ) else []
    items = [HistoryEvent(start + i, e) for i, e in enumerate(evs)]
    nxt = start + len(evs)
    return Page(items, history_token(nxt) if nxt <= length[0] else None)


# the record's columns, read off `e` (lists join the tag table)
E_FULL = ", ".join("e." + col.strip() for col in FULL.split(","))


def list_executions(
    c: Any,
    *,
    statuses: list[str] | None,
    workflow: str | None,
    parent: str | None,
    limit: int,
    page_token: str | None,
    tags: dict[str, str] | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Page[Record]:
    """`list_query`'s page: IDs order by their bytes (SQLite's order; PostgreSQL's schema
    gives the column COLLATE "C")."""
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


def steps(c: Any, execution_id: str) -> list[StepRecord]:
    rows = c.execute(
        f"SELECT {STEP_COLUMNS} FROM steps WHERE execution_id=? ORDER BY first_seq",
        (execution_id,),
    ).fetchall()
    return [StepRecord(*r) for r in rows]


def describe(c: Any, execution_id: str) -> Description:
    """In one snapshot (the caller's transaction)."""
    record = load(c, execution_id)
    if record is None:
        raise not_found(execution_id)
    hb, lease = c.execute(
        "SELECT history_bytes, lease_expires_at FROM executions WHERE execution_id=?",
        (execution_id,),
    ).fetchone()
    children = [
        row_to_record(r)
        for r in c.execute(
            f"SELECT {FULL} FROM executions WHERE parent_id=? ORDER BY admitted_at, execution_id",
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


def verify(c: Any) -> list[str]:
    """Re-fold every history and compare it with the stored record (each `retried_by` with
    the newest retry folded from the retries' histories); returns the mismatches.
    Run it in one snapshot (`Core.snapshot`)."""
    problems = []
    linked: dict[str, str | None] = {}  # each record's stored retried_by
    retried: list[Record] = []  # the folded records that retry another
    ids = [r[0] for r in c.execute("SELECT execution_id FROM executions ORDER BY execution_id")]
    for execution_id in ids:
        stored = load(c, execution_id)
        try:  # an event its kind cannot read does not fold either
            folded = fold(events(c, execution_id))
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


def waits(c: Any, execution_id: str) -> list[Wait]:
    """What an execution waits on: store keys (oldest registration first), effects, then a
    concurrency slot."""
    out: list[Wait] = [
        StoreWait(r[0], r[1], float(r[2]))
        for r in c.execute(
            "SELECT key, step_key, registered_at FROM kv_waiters WHERE execution_id=? "
            "ORDER BY registered_at",
            (execution_id,),
        ).fetchall()
    ]
    out += [
        EffectWait(r[0], r[1], float(r[2]))
        for r in c.execute(
            "SELECT effect_id, step_key, wake_at FROM effect_waiters WHERE execution_id=?",
            (execution_id,),
        ).fetchall()
    ]
    out += [
        ConcurrencyWait(r[0], r[1])
        for r in c.execute(
            "SELECT workflow, slot_wait FROM executions WHERE execution_id=? "
            "AND slot_wait IS NOT NULL AND due_at IS NOT NULL",
            (execution_id,),
        ).fetchall()
    ]
    return out


def next_due_at(c: Any) -> float | None:
    row = c.execute(
        "SELECT MIN(t) FROM (SELECT MIN(due_at) AS t FROM executions WHERE due_at IS NOT NULL "
        "AND lease_token IS NULL AND slot_wait IS NULL "
        + pauses.SKIP_PAUSED  # a paused workflow's executions are not due for claims
        + "UNION ALL SELECT MIN(lease_expires_at) "
        "FROM executions WHERE lease_token IS NOT NULL UNION ALL SELECT MIN(deadline_at) "
        "FROM executions WHERE deadline_at IS NOT NULL) AS u"
    ).fetchone()
    return row[0] if row else None


def next_deadline_at(c: Any) -> float | None:
    row = c.execute(
        "SELECT MIN(deadline_at) FROM executions WHERE deadline_at IS NOT NULL"
    ).fetchone()
    return None if row is None or row[0] is None else float(row[0])


class Reads:
    """The read client of one store: each call on a read connection; the reads of several
    statements in one snapshot."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def get(self, execution_id: str) -> Record | None:
        return self._core.read(lambda c: load(c, execution_id))

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
    ) -> Page[Record]:
        return self._core.read(
            lambda c: list_executions(
                c,
                statuses=statuses,
                workflow=workflow,
                parent=parent,
                limit=limit,
                page_token=page_token,
                tags=tags,
                since=since,
                until=until,
            )
        )

    def history(
        self, execution_id: str, limit: int = DEFAULT_PAGE, page_token: str | None = None
    ) -> Page[HistoryEvent]:
        return self._core.snapshot(lambda c: history(c, execution_id, limit, page_token))

    def describe(self, execution_id: str) -> Description:
        return self._core.snapshot(lambda c: describe(c, execution_id))

    def steps(self, execution_id: str) -> builtins.list[StepRecord]:
        return self._core.read(lambda c: steps(c, execution_id))

    def events(self, execution_id: str) -> builtins.list[Event]:
        return self._core.read(lambda c: events(c, execution_id))

    def waits(self, execution_id: str) -> builtins.list[Wait]:
        return self._core.snapshot(lambda c: waits(c, execution_id))

    def next_due_at(self) -> float | None:
        return self._core.read(next_due_at)

    def next_times(self) -> tuple[float | None, float | None]:
        return self._core.snapshot(lambda c: (next_due_at(c), next_deadline_at(c)))

    def slot_waits(self, execution_ids: builtins.list[str]) -> dict[str, str]:
        from ys.store.sql.concurrency import waiting

        return self._core.read(lambda c: waiting(c, execution_ids))

    def script_waits(self, execution_ids: builtins.list[str]) -> dict[str, str]:
        from ys.store.sql.versions import script_waits

        return self._core.read(lambda c: script_waits(c, execution_ids))
