"""Execution transaction bodies on PostgreSQL: what runs inside one write transaction.

The same meaning as the SQLite bodies (ys/store/executions.py), made safe for many daemons
writing one database at READ COMMITTED:

- A write that changes an execution first locks its row (`load(..., lock=True)`: SELECT ...
  FOR UPDATE), so two daemons never append the same event number, and the record it folds
  events onto is the newest committed one.
- A worker's write is fenced by its lease token in the statement that writes: the row is
  locked only if the token still holds a live lease, and the projection's UPDATE repeats the
  condition (`append(..., token=)`). A stale daemon or worker writes nothing.
- A claim takes due rows with FOR UPDATE SKIP LOCKED (daemons claiming together take
  different rows, none waits), after sweeping expired leases the same way, any daemon's.
- An admission inserts with ON CONFLICT DO NOTHING: a concurrent admission of the same ID
  waits for the other's commit, then finds the execution and decides (one execution).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

from ys.errors import ExecutionAdmissionError, LeaseLost, NotFoundError
from ys.store import sql_sched
from ys.store.base import SLOT_ALL, Admission, ConcurrencyLimit, Delivery, slot_of
from ys.store.postgres import concurrency
from ys.store.postgres.shared import RECORD_COLUMNS as RECORD_COLUMNS
from ys.store.postgres.shared import (
    admission_event,
    new_execution_id,
    project,
    run_state,
    step_save,
)
from ys.store.postgres.shared import row_to_record as row_to_record
from ys.store.postgres.versions import current_script, delivery_script
from ys.store.records import (
    CANCEL_REQUESTED,
    CLAIMED,
    RELEASED,
    WAKE_REQUESTED,
    Event,
    Record,
)

# RECORD_COLUMNS: the record's columns, in the order row_to_record reads them (shared.py:
# one list and one reader for both adapters).
FULL = RECORD_COLUMNS.format(params="params", context="context")
LIGHT = RECORD_COLUMNS.format(params="''", context="''")
_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode

INSERT_EXECUTION = (
    "INSERT INTO executions (execution_id, workflow, params, context, status, outcome, "
    "admitted_at, updated_at, due_at, covered_due_at, prior_status, attempts, parent_id, "
    "parent_step, parent_detached, cancel_requested, history_length, history_bytes, "
    "script_sha256, tags, retry_of) "
    "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
    "ON CONFLICT (execution_id) DO NOTHING"
)
# One row per tag, in the order lists read (`ys list --tag k=v`: newest admitted first).
INSERT_TAG = (
    "INSERT INTO execution_tags (key, value, admitted_at, execution_id) VALUES (%s,%s,%s,%s)"
)


def tags_text(tags: dict[str, str]) -> str | None:
    """The executions row's copy of the tags (NULL when there are none)."""
    return _JSON(tags) if tags else None


INSERT_EVENT = "INSERT INTO events (execution_id, seq, at, kind, data) VALUES (%s,%s,%s,%s,%s)"


def not_found(execution_id: str) -> NotFoundError:
    return NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")


def lease_lost(execution_id: str) -> LeaseLost:
    return LeaseLost(
        "LEASE_LOST",
        f"the delivery of {execution_id!r} no longer holds its lease; another delivery owns it",
    )


def load(c: Any, execution_id: str, payload: bool = True, lock: bool = False) -> Record | None:
    """The record; with `lock`, its row stays locked until the transaction ends."""
    row = c.execute(
        f"SELECT {FULL if payload else LIGHT} FROM executions WHERE execution_id = %s"
        + (" FOR UPDATE" if lock else ""),
        (execution_id,),
    ).fetchone()
    return row_to_record(row) if row else None


def load_leased(c: Any, execution_id: str, token: str, now: float, payload: bool = False) -> Record:
    """The record, locked, if `token` holds a live lease on it; else LEASE_LOST (or not
    found). The fence and the lock are one statement: no other write slips between."""
    row = c.execute(
        f"SELECT {FULL if payload else LIGHT} FROM executions WHERE execution_id = %s "
        "AND lease_token = %s AND lease_expires_at > %s FOR UPDATE",
        (execution_id, token, now),
    ).fetchone()
    if row is None:
        exists = c.execute(
            "SELECT 1 FROM executions WHERE execution_id = %s", (execution_id,)
        ).fetchone()
        raise lease_lost(execution_id) if exists else not_found(execution_id)
    return row_to_record(row)


def _outcome_text(record: Record) -> str | None:
    return _JSON(record.outcome) if record.outcome is not None else None


def record_row(record: Record, history_bytes: int) -> tuple[Any, ...]:
    """INSERT_EXECUTION's values for a record not stored yet."""
    p = record.parent or {}
    return (
        record.execution_id,
        record.workflow,
        record.params_json,
        record.context_json,
        record.status,
        _outcome_text(record),
        record.admitted_at,
        record.updated_at,
        record.due_at,
        record.covered_due_at,
        record.prior_status,
        record.attempts,
        p.get("execution_id"),
        p.get("step_key"),
        bool(p.get("detached")) if p else None,
        record.cancel_requested,
        record.history_length,
        history_bytes,
        record.script_sha256,
        tags_text(record.tags),
        record.retry_of,
    )


def append(
    c: Any, prior: Record, events: list[Event], token: str | None = None, clear_lease: bool = False
) -> Record:
    """Fold `events` onto `prior` (its row locked by this transaction) and persist the
    events and the new projection together. With `token`, the UPDATE is fenced by it; with
    `clear_lease`, the lease ends and a concurrency slot it held frees."""
    record, rows, nbytes = project(prior, events)
    sql = (
        "UPDATE executions SET status=%s, outcome=%s, updated_at=%s, due_at=%s, "
        "covered_due_at=%s, prior_status=%s, attempts=%s, cancel_requested=%s, "
        "history_length=%s, history_bytes=history_bytes+%s, "
        "deadline_at=CASE WHEN %s THEN NULL ELSE deadline_at END, "
        "slot_wait=CASE WHEN %s THEN NULL ELSE slot_wait END"
        + (
            ", lease_token=NULL, lease_expires_at=NULL, lease_holder=NULL, lease_pid=NULL"
            if clear_lease
            else ""
        )
        + " WHERE execution_id=%s"
        + (" AND lease_token=%s" if token is not None else "")
        + (" RETURNING workflow, slot" if clear_lease else "")
    )
    args: tuple[Any, ...] = (
        record.status,
        _outcome_text(record),
        record.updated_at,
        record.due_at,
        record.covered_due_at,
        record.prior_status,
        record.attempts,
        record.cancel_requested,
        record.history_length,
        nbytes,
        record.terminal,  # an execution that ended has no deadline left
        record.terminal,  # nor waits for a concurrency slot
        record.execution_id,
    )
    cur = c.execute(sql, args + ((token,) if token is not None else ()))
    if cur.rowcount != 1:
        raise lease_lost(record.execution_id)
    if clear_lease:
        workflow, slot = cur.fetchone()
        if slot is not None:  # the lease held a concurrency slot: it frees with the lease
            concurrency.free(c, workflow, slot)
    c.cursor().executemany(INSERT_EVENT, rows)
    return record


def admit_new(
    c: Any,
    execution_id: str,
    workflow: str,
    params_json: str,
    context_json: str,
    parent: dict[str, Any] | None,
    at: float,
    tags: dict[str, str] | None = None,
    retry_of: str | None = None,
) -> bool:
    """Insert a new execution and its `admitted` event; False (nothing written) when the ID
    is taken, also by an admission that commits while this one waits for it. The record
    names the workflow's current script version (ys.store.postgres.versions)."""
    sha, _ = current_script(c, workflow)
    event = admission_event(
        execution_id, workflow, params_json, context_json, parent, at, sha, tags, retry_of
    )
    record, rows, nbytes = project(None, [event])
    if c.execute(INSERT_EXECUTION, record_row(record, nbytes)).rowcount != 1:
        return False
    c.execute(INSERT_EVENT, rows[0])
    if record.tags:
        c.cursor().executemany(
            INSERT_TAG,
            [(k, v, record.admitted_at, record.execution_id) for k, v in record.tags.items()],
        )
    return True


def admit_tx(
    c: Any,
    workflow: str,
    params_json: str,
    context_json: str,
    execution_id: str | None,
    if_exists: str,
    parent: dict[str, Any] | None,
    at: float,
    tags: dict[str, str] | None = None,
) -> Admission:
    if execution_id is None:
        while True:  # a taken ID (32 random bits in one millisecond) is drawn again
            candidate = new_execution_id(workflow, at)
            if admit_new(c, candidate, workflow, params_json, context_json, parent, at, tags):
                return Admission(candidate, started=True)
    if admit_new(c, execution_id, workflow, params_json, context_json, parent, at, tags):
        return Admission(execution_id, started=True)
    row = c.execute(
        "SELECT workflow, params, context, status, tags FROM executions WHERE execution_id=%s",
        (execution_id,),
    ).fetchone()
    if row is None:  # pruned between the two statements: admit it after all
        return admit_tx(
            c, workflow, params_json, context_json, execution_id, if_exists, parent, at, tags
        )
    same = row[0] == workflow and row[1] == params_json and row[2] == context_json
    same = same and tags_text(tags or {}) == row[4]
    if if_exists == "use-existing" and same:
        return Admission(execution_id, started=False)
    why = "" if if_exists == "fail" else " with a different workflow, params or context"
    raise ExecutionAdmissionError(
        "EXECUTION_ID_CONFLICT",
        f"{execution_id} already exists{why} ({row[3]})",
        execution_id=execution_id,
        status=row[3],
    )


def request_wake_tx(
    c: Any, execution_id: str, due: float, now: float, reason: str = "requested"
) -> str:
    record = load(c, execution_id, payload=False, lock=True)
    if record is None:
        raise not_found(execution_id)
    if record.terminal:
        return "ignored"
    if record.due_at is not None and record.due_at <= due:
        return "requested"  # merges into an earlier pending wake: nothing changes
    append(c, record, [Event(WAKE_REQUESTED, now, {"due_at": due, "reason": reason})])
    return "requested"


def wake_workflow_tx(c: Any, workflow: str, now: float) -> int:
    """Wake every unleased admitted or suspended execution of `workflow` with no wake due by
    `now`; rows another transaction holds are left to it (it is changing them anyway)."""
    rows = c.execute(
        "SELECT execution_id FROM executions WHERE workflow=%s "
        "AND status IN ('admitted','suspended') AND lease_token IS NULL "
        "AND (due_at IS NULL OR due_at > %s) FOR UPDATE SKIP LOCKED",
        (workflow, now),
    ).fetchall()
    n = concurrency.release_waiters(c, workflow)  # its limit may have changed too
    return n + sum(
        request_wake_tx(c, r[0], now, now, f"workflow {workflow} changed") == "requested"
        for r in rows
    )


def release_expired_tx(
    c: Any, now: float, limit: int | None, holder: str | None = None
) -> list[str]:
    """Release expired leases (only `holder`'s when given), oldest first. SKIP LOCKED: a row
    another daemon is releasing or renewing now is its business."""
    rows = c.execute(
        "SELECT execution_id FROM executions WHERE lease_token IS NOT NULL "
        "AND lease_expires_at <= %s"
        + (" AND lease_holder = %s" if holder else "")
        + " ORDER BY lease_expires_at LIMIT %s FOR UPDATE SKIP LOCKED",
        (now, holder, limit) if holder else (now, limit),
    ).fetchall()
    released = []
    for (execution_id,) in rows:
        record = load(c, execution_id, payload=False, lock=True)
        assert record is not None
        append(
            c,
            record,
            [Event(RELEASED, now, {"reason": "lease_expired", "retry_at": now})],
            clear_lease=True,
        )
        released.append(execution_id)
    return released


MAX_PASSED_OVER = 1000  # executions one claim may mark waiting for a slot (the rest: next claim)


def claim_due_tx(
    c: Any,
    now: float,
    limit: int,
    lease: float,
    holder: str,
    pid: int,
    limits: Mapping[str, ConcurrencyLimit] | None = None,
    heal: bool = False,
) -> list[Delivery]:
    """Sweep expired leases (any daemon's), then lease up to `limit` due executions (with
    `heal`, after making claimable the waiters of groups with free slots: concurrency.heal).
    FOR UPDATE SKIP LOCKED: daemons claiming at once take disjoint rows; a row claimed and
    committed by another since this statement began is re-checked and left out. One of a
    workflow in `limits` is leased only if its slot group has a free slot, counted under the
    group's lock (ys/store/postgres/concurrency.py says why that holds across daemons); else
    it is marked waiting and the claim looks further."""
    release_expired_tx(c, now, limit=max(limit, 16))
    if heal and limits:
        concurrency.heal(c, limits)
    out: list[Delivery] = []
    passed = 0
    while len(out) < limit:
        want = limit - len(out)
        rows = c.execute(
            f"SELECT {LIGHT}, deadline_at FROM executions WHERE due_at <= %s "
            "AND lease_token IS NULL AND slot_wait IS NULL "
            + sql_sched.SKIP_PAUSED  # a paused workflow's executions wait (ys workflows pause)
            + "AND (deadline_at IS NULL OR deadline_at > %s) "
            "ORDER BY due_at, execution_id LIMIT %s FOR UPDATE SKIP LOCKED",
            (now, now, want),  # past its deadline: never delivered again (`time_out` ends it)
        ).fetchall()
        waited = 0
        for row in rows:  # deadline_at: the last column, after the record's
            record = row_to_record(row)
            delivery = _claim_one(c, record, now, lease, holder, pid, limits, row[-1])
            if delivery is None:
                waited += 1
            else:
                out.append(delivery)
        passed += waited
        if len(rows) < want or not waited or passed >= MAX_PASSED_OVER:
            break
    return out


def claim_new(
    c: Any, execution_id: str, now: float, lease: float, holder: str, pid: int
) -> Delivery:
    """Lease an execution this transaction admitted (its first delivery, claimed in its
    admission's transaction: no concurrency limit applies to its workflow). Nobody else
    sees the row before the commit, so it needs no lock."""
    row = c.execute(
        f"SELECT {LIGHT}, deadline_at FROM executions WHERE execution_id=%s", (execution_id,)
    ).fetchone()
    delivery = _claim_one(c, row_to_record(row), now, lease, holder, pid, None, row[-1])
    assert delivery is not None  # without limits a due execution is always leased
    return delivery


def _claim_one(
    c: Any,
    record: Record,
    now: float,
    lease: float,
    holder: str,
    pid: int,
    limits: Mapping[str, ConcurrencyLimit] | None,
    deadline_at: float | None = None,
) -> Delivery | None:
    """Lease one due execution (its row locked), or (its slot group full) mark it waiting
    and return None."""
    assert not record.terminal
    slot = None
    bound = limits.get(record.workflow) if limits else None
    # Cancelled before it ever ran: no workflow code runs (cancel_seen: the dispatcher ends it
    # cancelled at once), so it needs no slot and does not wait for one.
    never_ran = record.cancel_requested and record.attempts == 0
    if bound is not None and not never_ran:
        slot = SLOT_ALL
        if bound.key is not None:
            (params,) = c.execute(
                "SELECT params FROM executions WHERE execution_id=%s", (record.execution_id,)
            ).fetchone()
            slot = slot_of(params, bound.key)
        concurrency.lock(c, record.workflow, slot)
        if concurrency.held(c, record.workflow, slot) >= bound.n:
            concurrency.wait(c, record.execution_id, slot)
            return None
    token = secrets.token_hex(16)
    expires = now + lease
    claim: dict[str, Any] = {"attempt": record.attempts + 1}
    script = delivery_script(c, record)
    if script is not None:
        claim["script_sha256"] = script
    record = append(c, record, [Event(CLAIMED, now, claim)])
    c.execute(
        "UPDATE executions SET lease_token=%s, lease_expires_at=%s, lease_holder=%s, "
        "lease_pid=%s, slot=%s WHERE execution_id=%s",
        (token, expires, holder, pid, slot, record.execution_id),
    )
    seen = (bound is not None and never_ran) or (
        record.cancel_requested and cancel_seen(c, record.execution_id)
    )
    return Delivery(
        record.execution_id,
        token,
        record.attempts,
        expires,
        record.workflow,
        cancel_requested=record.cancel_requested,
        cancel_seen=seen,
        script_sha256=script,
        deadline_at=deadline_at,
        state=run_state(c, record.execution_id, "%s"),
    )


def cancel_seen(c: Any, execution_id: str) -> bool:
    """Whether a delivery ended without an outcome after the cancellation was requested (a
    release follows the request): that delivery was told, or was running when it came."""
    row = c.execute(
        "SELECT kind FROM events WHERE execution_id=%s AND kind IN (%s, %s) "
        "ORDER BY seq DESC LIMIT 1",
        (execution_id, CANCEL_REQUESTED, RELEASED),
    ).fetchone()
    return row is not None and row[0] == RELEASED


def renew_tx(c: Any, execution_id: str, token: str, now: float, expires: float) -> float:
    """A heartbeat, fenced in its one statement."""
    cur = c.execute(
        "UPDATE executions SET lease_expires_at=%s WHERE execution_id=%s AND lease_token=%s "
        "AND lease_expires_at > %s",
        (expires, execution_id, token, now),
    )
    if cur.rowcount != 1:
        exists = c.execute(
            "SELECT 1 FROM executions WHERE execution_id=%s", (execution_id,)
        ).fetchone()
        raise lease_lost(execution_id) if exists else not_found(execution_id)
    return expires


def release_tx(c: Any, execution_id: str, token: str, now: float, data: dict[str, Any]) -> None:
    record = load_leased(c, execution_id, token, now)
    append(c, record, [Event(RELEASED, now, data)], token=token, clear_lease=True)


def acknowledge_tx(
    c: Any, execution_id: str, token: str, event: Event, now: float, on_failure: str | None = None
) -> dict[str, Any]:
    """Record a delivery's outcome; a failure admits `on_failure` (its handler workflow) in
    this same transaction (ys.store.postgres.handlers)."""
    record = load(c, execution_id, payload=False, lock=True)
    if record is None:
        raise not_found(execution_id)
    if record.terminal:
        assert record.outcome is not None
        return record.outcome  # terminal outcomes are immutable: the first one wins
    record = load_leased(c, execution_id, token, now)
    record = append(c, record, [event], token=token, clear_lease=True)
    if record.terminal and record.parent is not None:
        wake_waiting_parent(c, record, now)
    if on_failure is not None:
        from ys.store.postgres.handlers import failure_handler_tx

        failure_handler_tx(c, record, on_failure, now)
    return record.outcome if record.outcome is not None else {"status": "suspended"}


def wake_waiting_parent(c: Any, child: Record, now: float) -> None:
    """A caller blocked in step.call on this child is woken in the child's final transaction."""
    assert child.parent is not None
    parent_id, key = child.parent["execution_id"], child.parent["step_key"]
    waiting = c.execute(
        "SELECT 1 FROM steps WHERE execution_id=%s AND key=%s AND status='waiting'",
        (parent_id, key),
    ).fetchone()
    if waiting is not None:
        request_wake_tx(c, parent_id, now, now, reason=f"child {child.execution_id} ended")


def save_step_tx(
    c: Any,
    execution_id: str,
    token: str,
    key: str,
    kind: str,
    status: str,
    value: str | None,
    attempts: int,
    wake_at: float | None,
    now: float,
    error: dict[str, Any] | None,
) -> bool:
    record = load_leased(c, execution_id, token, now)
    event = step_save(c, "%s", record, key, kind, status, value, attempts, wake_at, now, error)
    if event is not None:
        append(c, record, [event], token=token)
    return record.cancel_requested
