"""Failure handlers (DESIGN.md §7): a workflow admitted in the transaction that records a
failure, so that it is exactly one per failure, durable, retried and visible like any other.

An execution that ends `failed` admits `<ID>.on-failure` with params `{"execution_id",
"workflow", "error", "attempts", "tags"}`; a schedule slot skipped (too late, or missed under
`catch_up=skip`) admits `<schedule>@<slot>.on-failure` with `{"schedule", "slot", "reason"}`.
A handler's context names what it handles (`on_failure_of`), and a handler's own failure
admits nothing, so a failing handler cannot start a chain. The ID is taken once: a second
failure path for the same ID (a repeated acknowledgement) finds it and admits nothing.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ys.contract import CONTEXT_KEY, handler_id  # noqa: F401 - the handlers' naming rule
from ys.store.records import FAILED, Record
from ys.store.sqlite.executions import _admit_new, encode_event_value

# The error a handler gets: what a person reads (the rest of an error can be large)
_ERROR_FIELDS = ("name", "message")


def is_handler(c: sqlite3.Connection, execution_id: str) -> bool:
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
    c: sqlite3.Connection,
    handler: str,
    execution_id: str,
    params: dict[str, Any],
    of: str,
    now: float,
) -> str | None:
    taken = c.execute("SELECT 1 FROM executions WHERE execution_id=?", (execution_id,)).fetchone()
    if taken is not None:
        return None
    params_json = encode_event_value(params, "params")
    context_json = encode_event_value({CONTEXT_KEY: of}, "context")
    _admit_new(c, execution_id, handler, params_json, context_json, None, now)
    return execution_id


def failure_handler_tx(
    c: sqlite3.Connection, record: Record, handler: str | None, now: float
) -> str | None:
    """Inside the transaction that ended `record` failed: admit its handler, if it has one
    and is not itself a handler. Returns the handler's execution ID, or None."""
    if handler is None or record.status != FAILED or is_handler(c, record.execution_id):
        return None
    error = (record.outcome or {}).get("error") or {}
    params = {
        "execution_id": record.execution_id,
        "workflow": record.workflow,
        "error": {k: error.get(k) for k in _ERROR_FIELDS},
        "attempts": record.attempts,
        "tags": dict(record.tags),
    }
    return _admit(c, handler, handler_id(record.execution_id), params, record.execution_id, now)


def slot_handler_tx(
    c: sqlite3.Connection,
    handler: str | None,
    schedule: str,
    slot_name: str,
    slot: str,
    reason: str,
    now: float,
) -> str | None:
    """Inside the schedule's tick: admit the handler of a slot that will never fire.
    `slot_name` is the slot's execution ID (`<schedule>@<slot>`), `slot` its time."""
    if handler is None:
        return None
    params = {"schedule": schedule, "slot": slot, "reason": reason}
    return _admit(c, handler, handler_id(slot_name), params, slot_name, now)
