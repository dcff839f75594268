"""Execution transaction bodies: what runs inside one write transaction on an execution.

`load` reads a record, `append` folds events onto it with `apply` and persists the events and
the projection together; admission, wakes, leases, claims, outcomes and steps are built on the
two. `SqliteStore` calls these from its methods, and the other clients (starts, effects, durable
values, schedules) call them inside their own transactions, so a start, a settlement or a put
changes an execution in the same transaction as its own rows. `ys.store.sqlite` re-exports them.
"""

from __future__ import annotations

import json
import random
import secrets
import sqlite3
from collections.abc import Mapping
from typing import Any

from ys import codec
from ys.errors import ExecutionAdmissionError, InvalidArgument, LeaseLost, NotFoundError
from ys.store import sql_sched
from ys.store.base import (
    SLOT_ALL,
    Admission,
    ConcurrencyLimit,
    Delivery,
    RunState,
    StepRecord,
    slot_of,
)
from ys.store.records import (
    ADMITTED,
    CANCEL_REQUESTED,
    CANCELLED,
    CLAIMED,
    COMPLETED,
    FAILED,
    RELEASED,
    STEP,
    SUSPENDED,
    TERMINAL,
    WAKE_REQUESTED,
    Event,
    RawJSON,
    Record,
    apply,
)
from ys.store.sqlite import concurrency
from ys.store.sqlite.versions import current_script, delivery_script

_RECORD_COLUMNS = (
    "execution_id, workflow, {params}, {context}, status, outcome, admitted_at, updated_at, "
    "due_at, covered_due_at, prior_status, attempts, parent_id, parent_step, parent_detached, "
    "cancel_requested, history_length, script_sha256, tags, retry_of, retried_by"
)
_FULL = _RECORD_COLUMNS.format(params="params", context="context")
_LIGHT = _RECORD_COLUMNS.format(params="''", context="''")


def row_to_record(row: tuple[Any, ...]) -> Record:
    parent = None
    if row[12] is not None:
        parent = {"execution_id": row[12], "step_key": row[13], "detached": bool(row[14])}
    return Record(
        execution_id=row[0],
        workflow=row[1],
        params_json=row[2],
        context_json=row[3],
        status=row[4],
        outcome=json.loads(row[5]) if row[5] is not None else None,
        admitted_at=row[6],
        updated_at=row[7],
        due_at=row[8],
        covered_due_at=row[9],
        prior_status=row[10],
        attempts=row[11],
        parent=parent,
        cancel_requested=bool(row[15]),
        history_length=row[16],
        script_sha256=row[17],
        tags=json.loads(row[18]) if row[18] else {},
        retry_of=row[19],
        retried_by=row[20],
    )


def load(c: sqlite3.Connection, execution_id: str, payload: bool = True) -> Record | None:
    row = c.execute(
        f"SELECT {_FULL if payload else _LIGHT} FROM executions WHERE execution_id = ?",
        (execution_id,),
    ).fetchone()
    return row_to_record(row) if row else None


_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
_STR = json.encoder.encode_basestring  # a str as JSON, ensure_ascii=False (C when available)


def event_text(data: dict[str, Any]) -> str:
    """Canonical JSON of an event's data; RawJSON values (params) are embedded unchanged."""
    parts = []
    for key in sorted(data):
        value = data[key]
        if isinstance(value, RawJSON):
            text: str = value
        elif type(value) is str:
            text = _STR(value)
        else:
            text = _JSON(value)
        parts.append(_STR(key) + ":" + text)
    return "{" + ",".join(parts) + "}"


INSERT_EXECUTION = (
    "INSERT INTO executions (execution_id, workflow, params, context, status, outcome, "
    "admitted_at, updated_at, due_at, covered_due_at, prior_status, attempts, parent_id, "
    "parent_step, parent_detached, cancel_requested, history_length, history_bytes, "
    "script_sha256, tags, retry_of) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
INSERT_EVENT = "INSERT INTO events (execution_id, seq, at, kind, data) VALUES (?,?,?,?,?)"
# One row per tag, in the order lists read (`ys list --tag k=v`: newest admitted first).
INSERT_TAG = "INSERT INTO execution_tags (key, value, admitted_at, execution_id) VALUES (?,?,?,?)"


def tags_text(tags: dict[str, str]) -> str | None:
    """The executions row's copy of the tags (NULL when there are none)."""
    return _JSON(tags) if tags else None


def tag_rows(record: Record) -> list[tuple[Any, ...]]:
    return [(k, v, record.admitted_at, record.execution_id) for k, v in record.tags.items()]


def project(prior: Record | None, events: list[Event]) -> tuple[Record, list[tuple[Any, ...]], int]:
    """Pure: the record after `events` (folded with `apply`), their rows and their size in
    bytes. `append` persists the result; an admission computes it before its transaction."""
    record = prior
    seq = prior.history_length if prior else 0
    nbytes = 0
    rows = []
    for e in events:
        record = apply(record, e)
        seq += 1
        text = event_text(e.data)
        nbytes += len(text.encode("utf-8"))  # bytes, not characters
        rows.append((record.execution_id, seq, e.at, e.kind, text))
    assert record is not None
    return record, rows, nbytes


def _outcome_text(record: Record) -> str | None:
    return _JSON(record.outcome) if record.outcome is not None else None


def new_record_row(record: Record, history_bytes: int) -> tuple[Any, ...]:
    """The executions row of a record that is not stored yet (INSERT_EXECUTION's values)."""
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
        int(bool(p.get("detached"))) if p else None,
        int(record.cancel_requested),
        record.history_length,
        history_bytes,
        record.script_sha256,
        tags_text(record.tags),
        record.retry_of,
    )


def append(c: sqlite3.Connection, prior: Record | None, events: list[Event]) -> Record:
    """Fold `events` onto `prior` and persist the events and the new projection together."""
    record, rows, nbytes = project(prior, events)
    if prior is None:
        # first: a duplicate execution_id fails here, before any event is written
        c.execute(INSERT_EXECUTION, new_record_row(record, nbytes))
        if record.tags:
            c.executemany(INSERT_TAG, tag_rows(record))
    else:
        c.execute(
            "UPDATE executions SET status=?, outcome=?, updated_at=?, due_at=?, covered_due_at=?, "
            "prior_status=?, attempts=?, cancel_requested=?, history_length=?, "
            "history_bytes=history_bytes+?, "
            "deadline_at=CASE WHEN ? THEN NULL ELSE deadline_at END, "
            "slot_wait=CASE WHEN ? THEN NULL ELSE slot_wait END WHERE execution_id=?",
            (
                record.status,
                _outcome_text(record),
                record.updated_at,
                record.due_at,
                record.covered_due_at,
                record.prior_status,
                record.attempts,
                int(record.cancel_requested),
                record.history_length,
                nbytes,
                record.terminal,  # an execution that ended has no deadline left
                record.terminal,  # nor waits for a concurrency slot
                record.execution_id,
            ),
        )
    c.executemany(INSERT_EVENT, rows)
    return record


def check_lease(c: sqlite3.Connection, execution_id: str, token: str, now: float) -> None:
    """Fencing: only the live lease's token may write; an expired lease is already lost."""
    row = c.execute(
        "SELECT lease_token, lease_expires_at FROM executions WHERE execution_id = ?",
        (execution_id,),
    ).fetchone()
    if row is None:
        raise NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
    if row[0] is None or row[0] != token or row[1] <= now:
        raise LeaseLost(
            "LEASE_LOST",
            f"the delivery of {execution_id!r} no longer holds its lease; another delivery owns it",
        )


def encode_event_value(value: Any, path: str) -> str:
    enc = codec.encode(value, path=path)
    if enc.status != "encoded":
        raise ExecutionAdmissionError("INVALID_EXECUTION_EVENT", enc.message or "invalid value")
    assert enc.canonical is not None
    return enc.canonical


def new_execution_id(workflow: str, at: float) -> str:
    """`<workflow>-<admission time in ms, 11 hex digits><32 random bits, 8 hex digits>`.
    Time first, so that new IDs sort after older ones: an admission then inserts at the
    right edge of the ID indexes, where the executions admitted with it in one commit share
    their pages, instead of one random page each. A taken ID is drawn again (see admit_tx)."""
    return f"{workflow}-{max(0, int(at * 1000)):011x}{id_bits():08x}"


def id_bits() -> int:
    """32 random bits for a new execution ID. An ID must be unique, not secret (it grants
    nothing), so this is the random module (reseeded in forked children), not a system call
    per ID: os.urandom would hand the GIL to the writer thread in the middle of an
    admission. Tests replace it to force collisions."""
    return random.getrandbits(32)


def admit_tx(
    c: sqlite3.Connection,
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
        # No look-up first: the executions row is inserted before the events (see `append`),
        # so the rare duplicate (32 random bits in one millisecond) fails on the primary key
        # with nothing written, and another ID is drawn. Saves a query per admission.
        while True:
            candidate = new_execution_id(workflow, at)
            try:
                return _admit_new(
                    c, candidate, workflow, params_json, context_json, parent, at, tags
                )
            except sqlite3.IntegrityError as exc:
                if "executions.execution_id" not in str(exc):
                    raise
    else:
        row = c.execute(
            "SELECT workflow, params, context, status, tags FROM executions WHERE execution_id=?",
            (execution_id,),
        ).fetchone()
        if row is not None:
            same = row[0] == workflow and row[1] == params_json and row[2] == context_json
            if same and tags_text(tags or {}) != row[4]:
                same = False
            if if_exists == "use-existing" and same:
                return Admission(execution_id, started=False)
            why = "" if if_exists == "fail" else " with a different workflow, params or context"
            raise ExecutionAdmissionError(
                "EXECUTION_ID_CONFLICT",
                f"{execution_id} already exists{why} ({row[3]})",
                execution_id=execution_id,
                status=row[3],
            )
    return _admit_new(c, execution_id, workflow, params_json, context_json, parent, at, tags)


def admission_event(
    execution_id: str,
    workflow: str,
    params_json: str,
    context_json: str,
    parent: dict[str, Any] | None,
    at: float,
    script_sha256: str | None = None,
    tags: dict[str, str] | None = None,
    retry_of: str | None = None,
) -> Event:
    data: dict[str, Any] = {
        "execution_id": execution_id,
        "workflow": workflow,
        "params": RawJSON(params_json),
        "context": RawJSON(context_json),
    }
    if parent is not None:
        data["parent"] = parent
    if script_sha256 is not None:
        data["script_sha256"] = script_sha256
    if tags:
        data["tags"] = dict(tags)
    if retry_of is not None:
        data["retry_of"] = retry_of
    return Event(ADMITTED, at, data)


def admission_inserts(
    execution_id: str,
    workflow: str,
    params_json: str,
    context_json: str,
    parent: dict[str, Any] | None,
    at: float,
    script_sha256: str | None = None,
    tags: dict[str, str] | None = None,
) -> list[tuple[str, tuple[Any, ...]]]:
    """A new execution's rows, computed outside any transaction: what `_admit_new` writes
    when `execution_id` is unused. The group writer inserts many of these per commit."""
    event = admission_event(
        execution_id, workflow, params_json, context_json, parent, at, script_sha256, tags
    )
    record, rows, nbytes = project(None, [event])
    out = [(INSERT_EXECUTION, new_record_row(record, nbytes)), (INSERT_EVENT, rows[0])]
    out += [(INSERT_TAG, row) for row in tag_rows(record)]
    return out


def _admit_new(
    c: sqlite3.Connection,
    execution_id: str,
    workflow: str,
    params_json: str,
    context_json: str,
    parent: dict[str, Any] | None,
    at: float,
    tags: dict[str, str] | None = None,
    retry_of: str | None = None,
) -> Admission:
    sha, _ = current_script(c, workflow)
    event = admission_event(
        execution_id, workflow, params_json, context_json, parent, at, sha, tags, retry_of
    )
    append(c, None, [event])
    return Admission(execution_id, started=True)


def request_wake_tx(
    c: sqlite3.Connection, execution_id: str, due: float, now: float, reason: str = "requested"
) -> str:
    record = load(c, execution_id, payload=False)
    if record is None:
        raise NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
    if record.terminal:
        return "ignored"
    if record.due_at is not None and record.due_at <= due:
        return "requested"  # merges into an earlier pending wake: nothing changes
    append(c, record, [Event(WAKE_REQUESTED, now, {"due_at": due, "reason": reason})])
    return "requested"


def clear_lease(c: sqlite3.Connection, execution_id: str) -> None:
    """End the lease; a slot it held (a concurrency limit) frees in the same transaction."""
    row = c.execute(
        "UPDATE executions SET lease_token=NULL, lease_expires_at=NULL WHERE execution_id=? "
        "RETURNING workflow, slot",
        (execution_id,),
    ).fetchone()
    if row is not None and row[1] is not None:
        concurrency.free(c, row[0], row[1])


def release_expired_tx(c: sqlite3.Connection, now: float, limit: int | None) -> list[str]:
    rows = c.execute(
        "SELECT execution_id FROM executions WHERE lease_token IS NOT NULL "
        "AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT ?",
        (now, -1 if limit is None else limit),
    ).fetchall()
    released = []
    for (execution_id,) in rows:
        record = load(c, execution_id, payload=False)
        assert record is not None
        append(c, record, [Event(RELEASED, now, {"reason": "lease_expired", "retry_at": now})])
        clear_lease(c, execution_id)
        released.append(execution_id)
    return released


MAX_PASSED_OVER = 1000  # executions one claim may mark waiting for a slot (the rest: next claim)


def claim_due_tx(
    c: sqlite3.Connection,
    now: float,
    limit: int,
    lease: float,
    limits: Mapping[str, ConcurrencyLimit] | None = None,
    heal: bool = False,
) -> list[Delivery]:
    """Lease up to `limit` due executions; one of a workflow in `limits` only if its slot
    group has a free slot (counted in this transaction), else it is marked waiting and the
    claim looks further. With `heal`, waiters of groups with free slots are made claimable
    first (`concurrency.heal`)."""
    release_expired_tx(c, now, limit=max(limit, 16))
    if heal and limits:
        concurrency.heal(c, limits)
    out: list[Delivery] = []
    passed = 0
    while len(out) < limit:
        want = limit - len(out)
        rows = c.execute(
            "SELECT execution_id, deadline_at FROM executions WHERE due_at <= ? "
            "AND lease_token IS NULL AND slot_wait IS NULL "
            + sql_sched.SKIP_PAUSED  # a paused workflow's executions wait (ys workflows pause)
            + "AND (deadline_at IS NULL OR deadline_at > ?) ORDER BY due_at, execution_id LIMIT ?",
            (now, now, want),  # past its deadline: never delivered again (`time_out` ends it)
        ).fetchall()
        waited = 0
        for execution_id, deadline_at in rows:
            delivery = _claim_one(c, execution_id, now, lease, limits, deadline_at)
            if delivery is None:
                waited += 1
            else:
                out.append(delivery)
        passed += waited
        if len(rows) < want or not waited or passed >= MAX_PASSED_OVER:
            break
    return out


def claim_new(c: sqlite3.Connection, execution_id: str, now: float, lease: float) -> Delivery:
    """Lease an execution this transaction admitted (its first delivery, claimed in its
    admission's transaction: no concurrency limit applies to its workflow)."""
    (deadline_at,) = c.execute(
        "SELECT deadline_at FROM executions WHERE execution_id=?", (execution_id,)
    ).fetchone()
    delivery = _claim_one(c, execution_id, now, lease, None, deadline_at)
    assert delivery is not None  # without limits a due execution is always leased
    return delivery


def _claim_one(
    c: sqlite3.Connection,
    execution_id: str,
    now: float,
    lease: float,
    limits: Mapping[str, ConcurrencyLimit] | None,
    deadline_at: float | None = None,
) -> Delivery | None:
    """Lease one due execution, or (its slot group full) mark it waiting and return None."""
    record = load(c, execution_id, payload=False)
    assert record is not None and not record.terminal
    slot = None
    bound = limits.get(record.workflow) if limits else None
    # Cancelled before it ever ran: no workflow code runs (cancel_seen: the dispatcher ends it
    # cancelled at once), so it needs no slot and does not wait for one.
    never_ran = record.cancel_requested and record.attempts == 0
    if bound is not None and not never_ran:
        slot = SLOT_ALL
        if bound.key is not None:
            (params,) = c.execute(
                "SELECT params FROM executions WHERE execution_id=?", (execution_id,)
            ).fetchone()
            slot = slot_of(params, bound.key)
        if concurrency.held(c, record.workflow, slot) >= bound.n:
            concurrency.wait(c, execution_id, slot)
            return None
    token = secrets.token_hex(16)
    expires = now + lease
    claim: dict[str, Any] = {"attempt": record.attempts + 1}
    script = delivery_script(c, execution_id, record.workflow)
    if script is not None:
        claim["script_sha256"] = script
    record = append(c, record, [Event(CLAIMED, now, claim)])
    c.execute(
        "UPDATE executions SET lease_token=?, lease_expires_at=?, slot=? WHERE execution_id=?",
        (token, expires, slot, execution_id),
    )
    seen = (bound is not None and never_ran) or (
        record.cancel_requested and cancel_seen(c, execution_id)
    )
    return Delivery(
        execution_id,
        token,
        record.attempts,
        expires,
        record.workflow,
        cancel_requested=record.cancel_requested,
        cancel_seen=seen,
        script_sha256=script,
        deadline_at=deadline_at,
        state=run_state(c, execution_id, "?"),
    )


STEP_COLUMNS = "key, kind, status, value, attempts, wake_at, updated_at"


def run_state(c: Any, execution_id: str, ph: str) -> RunState:
    """A claimed execution's params, context and steps (both adapters: `ph` is the
    placeholder), read in the claim's transaction for its worker."""
    params, context = c.execute(
        f"SELECT params, context FROM executions WHERE execution_id={ph}", (execution_id,)
    ).fetchone()
    rows = c.execute(
        f"SELECT {STEP_COLUMNS} FROM steps WHERE execution_id={ph} ORDER BY first_seq",
        (execution_id,),
    ).fetchall()
    return RunState(params, context, [StepRecord(*r) for r in rows])


def cancel_seen(c: sqlite3.Connection, execution_id: str) -> bool:
    """Whether a delivery ended without an outcome after the cancellation was requested (a
    release follows the request): that delivery was told, or was running when it came."""
    row = c.execute(
        "SELECT kind FROM events WHERE execution_id=? AND kind IN (?, ?) ORDER BY seq DESC LIMIT 1",
        (execution_id, CANCEL_REQUESTED, RELEASED),
    ).fetchone()
    return row is not None and row[0] == RELEASED


def outcome_event(outcome: dict[str, Any], at: float) -> Event:
    """Validate a WorkflowRunOutcome and turn it into the event that records it."""
    status = outcome.get("status")
    if status == "suspended":
        return Event(SUSPENDED, at, {})
    if status == "completed":
        result = outcome.get("result")
        enc = codec.encode(result, path="result")
        if enc.status != "encoded" or isinstance(result, codec.ErrorValue):
            raise InvalidArgument("INVALID_ARGUMENT", enc.message or "invalid result")
        codec.check_size(enc.canonical or "", "result")  # the SDK checks it before sending
        # Results are stored as plain JSON (lossless for durable values without tagged errors).
        return Event(COMPLETED, at, {"result": json.loads(json.dumps(result))})
    if status == "failed":
        error = outcome.get("error") or {}
        if not isinstance(error, dict) or not isinstance(error.get("name"), str):
            raise InvalidArgument("INVALID_ARGUMENT", "a failed outcome needs error.name")
        clean: dict[str, Any] = {"name": error["name"], "message": str(error.get("message", ""))}
        for extra in ("code", "traceback"):
            if error.get(extra) is not None:
                if not isinstance(error[extra], str):
                    raise InvalidArgument("INVALID_ARGUMENT", f"outcome.error.{extra} must be text")
                clean[extra] = error[extra]
        if error.get("cause") is not None:  # any durable value (no NaN in a stored history)
            codec.dumps(error["cause"], path="outcome.error.cause")
            clean["cause"] = error["cause"]
        return Event(FAILED, at, {"error": clean})
    if status == "cancelled":
        return Event(CANCELLED, at, {})
    raise InvalidArgument("INVALID_ARGUMENT", f"unknown outcome status {status!r}")


def acknowledge_tx(
    c: sqlite3.Connection,
    execution_id: str,
    token: str,
    event: Event,
    now: float,
    on_failure: str | None = None,
) -> dict[str, Any]:
    """Record a delivery's outcome; a failure admits `on_failure` (its handler workflow) in
    this same transaction (ys.store.handlers)."""
    record = load(c, execution_id, payload=False)
    if record is None:
        raise NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
    if record.terminal:
        assert record.outcome is not None
        return record.outcome  # terminal outcomes are immutable: the first one wins
    check_lease(c, execution_id, token, now)
    record = append(c, record, [event])
    clear_lease(c, execution_id)
    if record.terminal and record.parent is not None:
        wake_waiting_parent(c, record, now)
    if record.status == FAILED and on_failure is not None:
        from ys.store.sqlite.handlers import failure_handler_tx

        failure_handler_tx(c, record, on_failure, now)
    return record.outcome if record.outcome is not None else {"status": "suspended"}


def wake_waiting_parent(c: sqlite3.Connection, child: Record, now: float) -> None:
    """A caller blocked in step.call on this child is woken in the child's final transaction."""
    assert child.parent is not None
    parent_id, key = child.parent["execution_id"], child.parent["step_key"]
    waiting = c.execute(
        "SELECT 1 FROM steps WHERE execution_id=? AND key=? AND status='waiting'",
        (parent_id, key),
    ).fetchone()
    if waiting is not None:
        request_wake_tx(c, parent_id, now, now, reason=f"child {child.execution_id} ended")


def step_error(value: str | None, status: str) -> dict[str, Any] | None:
    """The error a step's value holds (a failed attempt, or a retry waiting after one), as
    plain JSON; None for any other value. Only a tagged error's text starts so: a user key
    "$error" is written "$$error". A shell step's failed attempt keeps its exit status and
    output beside its error: {"error": <error>, "status": N, "stdout"...} (its first key)."""
    if value is None or status == "completed":
        return None
    if value.startswith('{"error":{"$error":'):
        shell = codec.decode(value)
        error = shell.get("error") if isinstance(shell, dict) else None
    elif value.startswith('{"$error":'):
        error = codec.decode(value)
    else:
        return None
    return error.to_json() if isinstance(error, codec.ErrorValue) else None


def completed_step(c: Any, execution_id: str, key: str, ph: str) -> bool:
    """Whether step `key` of the execution is recorded completed (both adapters)."""
    row = c.execute(
        f"SELECT 1 FROM steps WHERE execution_id={ph} AND key={ph} AND status='completed'",
        (execution_id, key),
    ).fetchone()
    return row is not None


def step_save(
    c: Any,
    ph: str,
    record: Record,
    key: str,
    kind: str,
    status: str,
    value: str | None,
    attempts: int,
    wake_at: float | None,
    now: float,
    error: dict[str, Any] | None,
) -> Event | None:
    """Write one step's row (both adapters: `ph` is the placeholder) and return the event its
    history gains, or None when the step is already completed (a completed step is final: a
    later save of it, the daemon recording a step's timeout just as the step's own save
    committed, changes nothing)."""
    execution_id = record.execution_id
    if completed_step(c, execution_id, key, ph):
        return None
    if kind == "call" and status == "waiting":
        # The child may have ended before this step said it waits: then nobody would wake us.
        child = c.execute(
            "SELECT e.status FROM start_requests s JOIN executions e ON e.execution_id=s.target_id"
            f" WHERE s.caller_id={ph} AND s.step_key={ph}",
            (execution_id, key),
        ).fetchone()
        if child is not None and child[0] in TERMINAL:
            wake_at = now
    marks = ",".join([ph] * 9)
    c.execute(
        "INSERT INTO steps (execution_id, key, kind, status, value, attempts, wake_at, "
        f"updated_at, first_seq) VALUES ({marks}) ON CONFLICT (execution_id, key) DO UPDATE SET "
        "kind=excluded.kind, status=excluded.status, value=excluded.value, "
        "attempts=excluded.attempts, wake_at=excluded.wake_at, updated_at=excluded.updated_at",
        (execution_id, key, kind, status, value, attempts, wake_at, now, record.history_length + 1),
    )
    data: dict[str, Any] = {"key": key, "kind": kind, "status": status}
    if attempts != 1:
        data["attempts"] = attempts
    if wake_at is not None:
        data["wake_at"] = wake_at
    if error is not None:
        # The history keeps each failed attempt's error: the step's row keeps only its last
        # value, which a retry that succeeds replaces with the result.
        data["error"] = error
    return Event(STEP, now, data)


def save_step_tx(
    c: sqlite3.Connection,
    execution_id: str,
    token: str,
    key: str,
    kind: str,
    status: str,
    value: str | None,
    attempts: int,
    wake_at: float | None,
    now: float,
) -> bool:
    check_lease(c, execution_id, token, now)
    record = load(c, execution_id, payload=False)
    assert record is not None
    event = step_save(
        c, "?", record, key, kind, status, value, attempts, wake_at, now, step_error(value, status)
    )
    if event is not None:
        append(c, record, [event])
    return record.cancel_requested


def wake_workflow_tx(c: sqlite3.Connection, workflow: str, now: float) -> int:
    """Wake every unleased admitted or suspended execution of `workflow` that has no wake due
    by `now` (they waited for its script to load); returns how many were woken."""
    rows = c.execute(
        "SELECT execution_id FROM executions WHERE workflow=? AND status IN ('admitted','suspended')"
        " AND lease_token IS NULL AND (due_at IS NULL OR due_at > ?)",
        (workflow, now),
    ).fetchall()
    n = concurrency.release_waiters(c, workflow)  # its limit may have changed too
    for (execution_id,) in rows:
        if (
            request_wake_tx(c, execution_id, now, now, f"workflow {workflow} changed")
            == "requested"
        ):
            n += 1
    return n
