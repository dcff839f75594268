"""The events a write builds, engine-neutral: an admission, an outcome, an encoded value; and
the execution IDs an admission draws."""

from __future__ import annotations

import json
import random
from typing import Any

from ys import codec
from ys.errors import ExecutionAdmissionError, InvalidArgument
from ys.store.base import Parent
from ys.store.eventdata import (
    AdmittedData,
    CancelledData,
    CompletedData,
    FailedData,
    SuspendedData,
)
from ys.store.records import (
    ADMITTED,
    CANCELLED,
    COMPLETED,
    FAILED,
    SUSPENDED,
    Event,
    RawJSON,
    Record,
)
from ys.values import Outcome


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


def admission_event(
    execution_id: str,
    workflow: str,
    params_json: str,
    context_json: str,
    parent: Parent | None,
    at: float,
    script_sha256: str | None = None,
    tags: dict[str, str] | None = None,
    retry_of: str | None = None,
    due_at: float | None = None,
) -> Event:
    """The first event; `due_at` (only when later than `at`) makes its first wake later
    (`ys trigger --in/--at`), else it is due at once."""
    data = AdmittedData(
        execution_id,
        workflow,
        params=RawJSON(params_json),
        context=RawJSON(context_json),
        parent=parent,
        script_sha256=script_sha256,
        tags=dict(tags) if tags else None,
        retry_of=retry_of,
        due_at=due_at if due_at is not None and due_at > at else None,
    )
    return Event(ADMITTED, at, data)


MAX_WARNINGS = 10
MAX_WARNING_CHARS = 2000


def outcome_event(outcome: Outcome, at: float) -> Event:
    """The event that records an outcome (its shape checked where it was read, ys.outcomes).
    What the delivery warned of (`warnings`: at most MAX_WARNINGS kept) rides on that event
    for `describe`; replay ignores it (docs/design.md, "Warnings of a delivery")."""
    warnings = None
    if outcome.warnings:
        warnings = tuple(codec.clip(w, MAX_WARNING_CHARS) for w in outcome.warnings[:MAX_WARNINGS])
    status = outcome.status
    if status == "suspended":
        return Event(SUSPENDED, at, SuspendedData(warnings))
    if status == "completed":
        result = outcome.result
        enc = codec.encode(result, path="result")
        if enc.status != "encoded" or isinstance(result, codec.ErrorValue):
            raise InvalidArgument("INVALID_ARGUMENT", enc.message or "invalid result")
        codec.check_size(enc.canonical or "", "result")  # the SDK checks it before sending
        # Results are stored as plain JSON (lossless for durable values without tagged errors).
        return Event(COMPLETED, at, CompletedData(json.loads(json.dumps(result)), warnings))
    if status == "failed":
        error = outcome.error
        if error is None:
            raise InvalidArgument("INVALID_ARGUMENT", "a failed outcome needs error.name")
        if error.cause is not None:  # any durable value (no NaN in a stored history)
            codec.dumps(error.cause, path="outcome.error.cause")
        return Event(FAILED, at, FailedData(error.to_json(), warnings))
    if status == "cancelled":
        return Event(CANCELLED, at, CancelledData(None, warnings))
    raise InvalidArgument("INVALID_ARGUMENT", f"unknown outcome status {status!r}")


def recorded_outcome(record: Record) -> Outcome:
    """The outcome a record holds, as an acknowledgement answers it (`suspended` while it
    has none)."""
    if record.outcome is None:
        return Outcome("suspended")
    return record.outcome
