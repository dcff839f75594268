"""Execution transaction bodies: what runs inside one write transaction on an execution, on
any SQL engine (the connection's dialect says what differs).

`load` reads a record, `append` folds events onto it with `apply` and persists the events and
the projection together; admission, wakes, outcomes and steps are built on the two (claims
and leases: `claims`). The other clients (starts, effects, values, schedules) call these
inside their own transactions, so a start, a settlement or a put changes an execution in
the same transaction as its own rows.

Safe for many writers at READ COMMITTED (PostgreSQL), and the same statements where one
writer holds the whole database (SQLite, whose dialect drops the locking clauses):

- A write that changes an execution first locks its row (`load(..., lock=True)`: SELECT ...
  FOR UPDATE), so two daemons never append the same event number, and the record it folds
  events onto is the newest committed one.
- A worker's write is fenced by its lease token in the statement that writes: the row is
  read (and locked) only if the token still holds a live lease, and the projection's UPDATE
  repeats the condition (`append(..., token=)`). A stale daemon or worker writes nothing.
- An admission inserts with ON CONFLICT DO NOTHING: a concurrent admission of the same ID
  waits for the other's commit, then finds the execution and decides (one execution).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ys.codec import ErrorValue
from ys.errors import ExecutionAdmissionError, LeaseLost, NotFoundError
from ys.store.base import Admission, Parent
from ys.store.eventdata import WakeRequestedData
from ys.store.records import (
    WAKE_REQUESTED,
    Event,
    Record,
)
from ys.store.sql import charts, concurrency
from ys.store.sql.events import admission_event, new_execution_id, recorded_outcome
from ys.store.sql.rows import FULL, LIGHT, new_record_row, outcome_text, project, row_to_record
from ys.store.sql.rows import tags_text as tags_text
from ys.store.sql.steps import step_save
from ys.store.sql.versions import waiting_for_script
from ys.values import Outcome, StepWrite

INSERT_EXECUTION = (
    "INSERT INTO executions (execution_id, workflow, params, context, status, outcome, "
    "admitted_at, updated_at, due_at, covered_due_at, prior_status, attempts, parent_id, "
    "parent_step, parent_detached, cancel_requested, history_length, history_bytes, "
    "script_sha256, tags, retry_of) "
    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (execution_id) DO NOTHING"
)
# An admission's INSERT: the workflow's current script version read in it (history_bytes
# grows by the bytes the version adds to the event) and returned; no row if the ID is taken.
_SCRIPT = "(SELECT sha256 FROM scripts WHERE workflow=?)"
ADMIT_EXECUTION = INSERT_EXECUTION.replace(
    "?,?,?,?,?)", f"?,? + CASE WHEN {_SCRIPT} IS NULL THEN 0 ELSE ? END, {_SCRIPT},?,?)"
).replace("DO NOTHING", "DO NOTHING RETURNING script_sha256")
# One row per tag, in the order lists read (`ys list --tag k=v`: newest admitted first).
INSERT_TAG = "INSERT INTO execution_tags (key, value, admitted_at, execution_id) VALUES (?,?,?,?)"


UNKNOWN = object()  # a value the caller did not read (append reads it)
INSERT_EVENT = "INSERT INTO events (execution_id, seq, at, kind, data) VALUES (?,?,?,?,?)"


def not_found(execution_id: str) -> NotFoundError:
    return NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")


def lease_lost(execution_id: str) -> LeaseLost:
    return LeaseLost(
        "LEASE_LOST",
        f"the delivery of {execution_id!r} no longer holds its lease; another delivery owns it",
    )


def renew_lease(
    c: Any,
    execution_id: str,
    token: str,
    now: float,
    expires: float,
    also: tuple[tuple[str, Any], ...] = (),
) -> float:
    """Extend a live lease to `expires` (and set the columns `also` names with it), fenced in
    its one statement: LeaseLost when the token no longer holds it."""
    extra = "".join(f", {column}=?" for column, _ in also)
    cur = c.execute(
        f"UPDATE executions SET lease_expires_at=?{extra} WHERE execution_id=? "
        "AND lease_token=? AND lease_expires_at > ?",
        (expires, *(value for _, value in also), execution_id, token, now),
    )
    if cur.rowcount != 1:
        exists = c.execute(
            "SELECT 1 FROM executions WHERE execution_id=?", (execution_id,)
        ).fetchone()
        raise lease_lost(execution_id) if exists else not_found(execution_id)
    return expires


def load(c: Any, execution_id: str, payload: bool = True, lock: bool = False) -> Record | None:
    """The record; with `lock`, its row stays locked until the transaction ends."""
    row = c.execute(
        f"SELECT {FULL if payload else LIGHT} FROM executions WHERE execution_id = ?"
        + (c.dialect.for_update if lock else ""),
        (execution_id,),
    ).fetchone()
    return row_to_record(row) if row else None


def load_leased(c: Any, execution_id: str, token: str, now: float, payload: bool = False) -> Record:
    """The record, locked, if `token` holds a live lease on it; else LEASE_LOST (or not
    found). The fence and the lock are one statement: no other write slips between."""
    row = c.execute(
        f"SELECT {FULL if payload else LIGHT} FROM executions WHERE execution_id = ? "
        "AND lease_token = ? AND lease_expires_at > ?" + c.dialect.for_update,
        (execution_id, token, now),
    ).fetchone()
    if row is None:
        exists = c.execute(
            "SELECT 1 FROM executions WHERE execution_id = ?", (execution_id,)
        ).fetchone()
        raise lease_lost(execution_id) if exists else not_found(execution_id)
    return row_to_record(row)


class Fenced(NamedTuple):
    """A worker's write's first read (`fenced`): the record, whether the token holds a live
    lease, the concurrency slot the lease holds, the status of one step, and when the
    delivery was claimed."""

    record: Record
    leased: bool
    slot: str | None
    step_status: str | None
    claimed_at: float | None

    def check(self) -> Record:
        """The record, or LEASE_LOST when the token holds no live lease."""
        if not self.leased:
            raise lease_lost(self.record.execution_id)
        return self.record


_FENCED = (
    f"SELECT {LIGHT}, lease_token = ? AND lease_expires_at > ?, slot, "
    "(SELECT status FROM steps WHERE execution_id = ? AND key = ?), "
)
# when the delivery was claimed: its last `claimed` event, found by walking the execution's
# history back (a lookup as long as the delivery's steps), asked only by a delivery's end
_CLAIMED_AT = (
    "(SELECT at FROM events WHERE execution_id = ? AND kind = 'claimed' ORDER BY seq DESC LIMIT 1) "
)


def fenced(
    c: Any,
    execution_id: str,
    token: str,
    now: float,
    step: str | None = None,
    claimed: bool = True,
) -> Fenced | None:
    """The execution's row, locked, with what a step save or an outcome decides on, in one
    statement: the one read a worker's write waits for (docs/design.md, "On PostgreSQL":
    one round trip per durable operation). None if there is no such execution. Without
    `claimed` (a step's save, which ends no delivery) `claimed_at` is not looked up: None."""
    if claimed:
        sql = _FENCED + _CLAIMED_AT + "FROM executions WHERE execution_id = ?"
        args: tuple[Any, ...] = (token, now, execution_id, step, execution_id, execution_id)
    else:
        sql = _FENCED + "NULL FROM executions WHERE execution_id = ?"
        args = (token, now, execution_id, step, execution_id)
    row = c.execute(sql + c.dialect.for_update, args).fetchone()
    if row is None:
        return None
    return Fenced(row_to_record(row[:-4]), bool(row[-4]), row[-3], row[-2], row[-1])


def append(
    c: Any,
    prior: Record,
    events: list[Event],
    token: str | None = None,
    clear_lease: bool = False,
    slot: str | None | object = UNKNOWN,
    claimed_at: float | None | object = UNKNOWN,
    locked: bool = False,
) -> Record:
    """Fold `events` onto `prior` (its row locked by this transaction) and persist the
    events and the new projection together. With `token`, the UPDATE is fenced by it (the
    caller read the row with it, `load_leased` or `fenced`, in this transaction: locked and
    leased, so the fence cannot miss, and its count is not waited for); with `clear_lease`,
    the lease ends and a concurrency slot it held frees (`slot`, when the caller read it with
    the row: else the UPDATE returns it), and a delivery that ran is counted in the delivery
    durations' rollup (ys.store.sql.charts; `claimed_at`, when the caller read it). `locked`:
    the caller locked the row itself in this transaction (a claim's SKIP LOCKED), so the
    UPDATE's count is not waited for either."""
    record, rows, nbytes = project(prior, events)
    returning = clear_lease and slot is UNKNOWN
    sql = (
        "UPDATE executions SET status=?, outcome=?, updated_at=?, due_at=?, "
        "covered_due_at=?, prior_status=?, attempts=?, cancel_requested=?, "
        "history_length=?, history_bytes=history_bytes+?, "
        "deadline_at=CASE WHEN ? THEN NULL ELSE deadline_at END, "
        "slot_wait=CASE WHEN ? THEN NULL ELSE slot_wait END"
        + (_clear_lease(c) if clear_lease else "")
        + " WHERE execution_id=?"
        + (" AND lease_token=?" if token is not None else "")
        + (" RETURNING slot" if returning else "")
    )
    args: tuple[Any, ...] = (
        record.status,
        outcome_text(record),
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
    if returning:
        row = cur.fetchone()  # (sqlite3 counts a RETURNING statement's rows only once read)
        if row is None:
            raise lease_lost(record.execution_id)
        slot = row[0]
    elif token is None and not locked and cur.rowcount != 1:
        raise lease_lost(record.execution_id)
    if clear_lease and isinstance(slot, str):  # the lease held a concurrency slot: it frees
        concurrency.free(c, record.workflow, slot)
    if clear_lease and prior.status == "running":  # a delivery ends: how long it took
        if claimed_at is UNKNOWN:
            charts.record_delivery(c, record.execution_id, record.updated_at)
        else:
            assert claimed_at is None or isinstance(claimed_at, float | int)
            charts.record_delivered(c, record.updated_at, claimed_at)
    c.executemany(INSERT_EVENT, rows)
    return record


def _clear_lease(c: Any) -> str:
    """The assignments that end a lease (its holder's too, where leases name one)."""
    if c.dialect.owned_leases:
        return (
            ", lease_token=NULL, lease_expires_at=NULL, lease_holder=NULL, lease_pid=NULL"
            ", step_deadline_at=NULL, step_deadline=NULL"
        )
    return ", lease_token=NULL, lease_expires_at=NULL, step_deadline_at=NULL, step_deadline=NULL"


def admit_new(
    c: Any,
    execution_id: str,
    workflow: str,
    params_json: str,
    context_json: str,
    parent: Parent | None,
    at: float,
    tags: dict[str, str] | None = None,
    retry_of: str | None = None,
    due_at: float | None = None,
) -> bool:
    """Insert a new execution and its `admitted` event; False (nothing written) when the ID
    is taken, also by an admission that commits while this one waits for it. The record
    names the workflow's current script version (ys.store.sql.versions), read by the INSERT
    itself, which returns it for the event: the one statement an admission waits for
    (docs/design.md, "On PostgreSQL": one round trip per durable operation)."""
    new = (execution_id, workflow, params_json, context_json, parent, at)
    later = (tags, retry_of, due_at)
    record, rows, nbytes = project(None, [admission_event(*new, None, *later)])
    # with a version, the event's text is longer by the same number of bytes for any SHA-256
    versioned = project(None, [admission_event(*new, "0" * 64, *later)])[2]
    values = list(new_record_row(record, nbytes))
    # history_bytes (with the version's bytes if there is one), script_sha256
    values[17:19] = [nbytes, workflow, versioned - nbytes, workflow]
    inserted = c.execute(ADMIT_EXECUTION, values).fetchone()
    if inserted is None:
        return False
    if inserted[0] is not None:
        _, rows, _ = project(None, [admission_event(*new, inserted[0], *later)])
    c.execute(INSERT_EVENT, rows[0])
    if record.tags:
        c.executemany(
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
    parent: Parent | None,
    at: float,
    tags: dict[str, str] | None = None,
    due_at: float | None = None,
) -> Admission:
    """Admit one execution (`due_at` later than `at`: its first wake that late), or decide
    what a taken ID means (`if_exists`)."""
    new = (workflow, params_json, context_json, parent, at, tags)
    if execution_id is None:
        while True:  # a taken ID (32 random bits in one millisecond) is drawn again
            candidate = new_execution_id(workflow, at)
            if admit_new(c, candidate, *new, due_at=due_at):
                return Admission(candidate, started=True)
    if admit_new(c, execution_id, *new, due_at=due_at):
        return Admission(execution_id, started=True)
    row = c.execute(
        "SELECT workflow, params, context, status, tags FROM executions WHERE execution_id=?",
        (execution_id,),
    ).fetchone()
    if row is None:  # pruned between the two statements: admit it after all
        return admit_tx(
            c,
            workflow,
            params_json,
            context_json,
            execution_id,
            if_exists,
            parent,
            at,
            tags,
            due_at,
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
    append(c, record, [Event(WAKE_REQUESTED, now, WakeRequestedData(due, reason))])
    return "requested"


def wake_workflow_tx(c: Any, workflow: str, now: float) -> int:
    """Wake the executions of `workflow` that wait for its script (a delivery found it broken
    or missing) and are not due by `now`; returns how many were woken. Others (asleep, waiting
    for a value or a child) keep their wakes: an edit is no reason to deliver them."""
    rows = waiting_for_script(c, workflow, now)
    n = concurrency.release_waiters(c, workflow)  # its limit may have changed too
    return n + sum(
        request_wake_tx(c, r, now, now, f"workflow {workflow} changed") == "requested" for r in rows
    )


def acknowledge_tx(
    c: Any, execution_id: str, token: str, event: Event, now: float, on_failure: str | None = None
) -> Outcome:
    """Record a delivery's outcome; a failure admits `on_failure` (its handler workflow) in
    this same transaction (ys.store.sql.handlers)."""
    held = fenced(c, execution_id, token, now)
    if held is None:
        raise not_found(execution_id)
    if held.record.terminal:
        return recorded_outcome(held.record)  # terminal outcomes are immutable: the first wins
    record = append(
        c,
        held.check(),
        [event],
        token=token,
        clear_lease=True,
        slot=held.slot,
        claimed_at=held.claimed_at,
    )
    if record.terminal and record.parent is not None:
        wake_waiting_parent(c, record, now)
    if on_failure is not None:
        from ys.store.sql.handlers import failure_handler_tx  # (imports this module)

        failure_handler_tx(c, record, on_failure, now)
    return recorded_outcome(record)


def wake_waiting_parent(c: Any, child: Record, now: float) -> None:
    """A caller blocked in step.call on this child is woken in the child's final transaction."""
    assert child.parent is not None
    parent_id, key = child.parent.execution_id, child.parent.step_key
    waiting = c.execute(
        "SELECT 1 FROM steps WHERE execution_id=? AND key=? AND status='waiting'",
        (parent_id, key),
    ).fetchone()
    if waiting is not None:
        request_wake_tx(c, parent_id, now, now, reason=f"child {child.execution_id} ended")


def save_step_tx(
    c: Any,
    execution_id: str,
    token: str,
    key: str,
    step: StepWrite,
    now: float,
    error: ErrorValue | None,
) -> bool:
    held = fenced(c, execution_id, token, now, step=key, claimed=False)
    if held is None:
        raise not_found(execution_id)
    record = held.check()
    done = held.step_status == "completed"
    event = step_save(c, record, key, step, now, error, done)
    if event is not None:
        append(c, record, [event], token=token)
    return record.cancel_requested


def suspend_tx(
    c: Any,
    execution_id: str,
    token: str,
    key: str,
    step: StepWrite,
    now: float,
    error: ErrorValue | None,
    suspended: Event,
) -> Outcome:
    """A waiting step's save and the delivery's `suspended` outcome (as `save_step_tx` then
    `acknowledge_tx`), on one read of the row and one write of it."""
    held = fenced(c, execution_id, token, now, step=key)
    if held is None:
        raise not_found(execution_id)
    record = held.check()
    done = held.step_status == "completed"
    event = step_save(c, record, key, step, now, error, done)
    record = append(
        c,
        record,
        [suspended] if event is None else [event, suspended],
        token=token,
        clear_lease=True,
        slot=held.slot,
        claimed_at=held.claimed_at,
    )
    return recorded_outcome(record)
