"""Failure handlers on PostgreSQL (ys/store/handlers.py's rules): the handler's execution is
admitted in the transaction that records the failure, or that skips a schedule slot.

Its ID (`<ID>.on-failure`) is taken once: an admission racing another daemon's for the same ID
waits for that one's commit (ON CONFLICT DO NOTHING in `admit_new`) and then admits nothing.
"""

from __future__ import annotations

import json
from typing import Any

from ys.contract import CONTEXT_KEY, handler_id
from ys.store.postgres.executions import admit_new
from ys.store.postgres.shared import encode_event_value
from ys.store.records import FAILED, Record

_ERROR_FIELDS = ("name", "message")  # what a person reads (the rest of an error can be large)


def is_handler(c: Any, execution_id: str) -> bool:
    """Whether this execution was admitted as a failure handler (its context says so)."""
    row = c.execute(
        "SELECT context FROM executions WHERE execution_id=%s", (execution_id,)
    ).fetchone()
    if row is None:
        return False
    try:
        context = json.loads(row[0])
    except ValueError:
        return False
    return isinstance(context, dict) and CONTEXT_KEY in context


def _admit(
    c: Any, handler: str, execution_id: str, params: dict[str, Any], of: str, now: float
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
    c: Any, handler: str | None, schedule: str, slot_name: str, slot: str, reason: str, now: float
) -> str | None:
    """Inside the schedule's tick: admit the handler of a slot that will never fire."""
    if handler is None:
        return None
    params = {"schedule": schedule, "slot": slot, "reason": reason}
    return _admit(c, handler, handler_id(slot_name), params, slot_name, now)
