"""Failure handlers (docs/design.md, "Workflow options"): a workflow admitted in the transaction that records a
failure, so that it is exactly one per failure, durable, retried and visible like any other.

An execution that ends `failed` admits `<ID>.on-failure` with params `{"execution_id",
"workflow", "error", "attempts", "tags"}`; a schedule slot skipped (too late, or missed under
`catch_up=skip`) admits `<schedule>@<slot>.on-failure` with `{"schedule", "slot", "reason"}`.
A handler's context names what it handles (`on_failure_of`), and a handler's own failure
admits nothing, so a failing handler cannot start a chain. The ID is taken once: a second
failure path for the same ID (a repeated acknowledgement, or another daemon's admission
racing this one: ON CONFLICT DO NOTHING in `admit_new`) finds it and admits nothing.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

from ys.contract import CONTEXT_KEY, handler_id
from ys.store.records import FAILED, Record
from ys.store.sql.events import encode_event_value
from ys.store.sql.executions import admit_new


class HandledError(TypedDict):
    """What a person reads of the error handled (the rest of an error can be large); both
    None when the failure recorded no error."""

    name: str | None
    message: str | None


class FailureParams(TypedDict):
    """A failed execution's handler's params."""

    execution_id: str
    workflow: str
    error: HandledError
    attempts: int
    tags: dict[str, str]


class SlotParams(TypedDict):
    """A skipped schedule slot's handler's params."""

    schedule: str
    slot: str
    reason: str


def is_handler(c: Any, execution_id: str) -> bool:
    """Whether this execution was admitted as a failure handler (its context says so)."""
    row = c.execute(
        "SELECT context FROM executions WHERE execution_id=?", (execution_id,)
    ).fetchone()
    if row is None:
        return False
    try:
        context = json.loads(row[0])
    except ValueError:
        return False
    return isinstance(context, dict) and CONTEXT_KEY in context


def _admit(
    c: Any, handler: str, execution_id: str, params: FailureParams | SlotParams, of: str, now: float
) -> str | None:
    params_json = encode_event_value(params, "params")
    context_json = encode_event_value({CONTEXT_KEY: of}, "context")
    if not admit_new(c, execution_id, handler, params_json, context_json, None, now):
        return None  # taken: this failure's handler was admitted already
    return execution_id


def failure_handler_tx(c: Any, record: Record, handler: str | None, now: float) -> str | None:
    """Inside the transaction that ended `record` failed: admit its handler, if it has one
    and is not itself a handler. Returns the handler's execution ID, or None."""
    if handler is None or record.status != FAILED or is_handler(c, record.execution_id):
        return None
    error = record.outcome.error if record.outcome is not None else None
    params: FailureParams = {
        "execution_id": record.execution_id,
        "workflow": record.workflow,
        "error": {"name": error.name, "message": error.message}
        if error is not None
        else {"name": None, "message": None},
        "attempts": record.attempts,
        "tags": dict(record.tags),
    }
    return _admit(c, handler, handler_id(record.execution_id), params, record.execution_id, now)


def slot_handler_tx(
    c: Any, handler: str | None, schedule: str, slot_name: str, slot: str, reason: str, now: float
) -> str | None:
    """Inside the schedule's tick: admit the handler of a slot that will never fire."""
    if handler is None:
        return None
    params: SlotParams = {"schedule": schedule, "slot": slot, "reason": reason}
    return _admit(c, handler, handler_id(slot_name), params, slot_name, now)
