"""A delivery's outcome read from its JSON, once, where it enters the daemon: the worker
channel's request, the worker's HTTP route, and a record's stored outcome. Past this point it
travels as `ys.values.Outcome` (docs/design.md, "Wire formats"); the store checks what only it
can (a result's encoding and size) when it turns the outcome into its event."""

from __future__ import annotations

from typing import Any

from ys.errors import InvalidArgument
from ys.values import OUTCOME_STATUSES, Outcome, OutcomeError


def outcome_of(obj: Any) -> Outcome:
    """A WorkflowRunOutcome's JSON object as an `Outcome`; INVALID_ARGUMENT if it is not one."""
    if not isinstance(obj, dict):
        raise InvalidArgument("INVALID_ARGUMENT", 'outcome must be an object: {"status": ...}')
    status = obj.get("status")
    if status not in OUTCOME_STATUSES:
        raise InvalidArgument("INVALID_ARGUMENT", f"unknown outcome status {status!r}")
    warnings = warnings_of(obj.get("warnings"))
    if status == "completed":
        return Outcome("completed", result=obj.get("result"), warnings=warnings)
    if status == "failed":
        return Outcome("failed", error=error_of(obj.get("error") or {}), warnings=warnings)
    return Outcome(status, warnings=warnings)


def error_of(error: Any) -> OutcomeError:
    if not isinstance(error, dict) or not isinstance(error.get("name"), str):
        raise InvalidArgument("INVALID_ARGUMENT", "a failed outcome needs error.name")
    for extra in ("code", "traceback"):
        if error.get(extra) is not None and not isinstance(error[extra], str):
            raise InvalidArgument("INVALID_ARGUMENT", f"outcome.error.{extra} must be text")
    return OutcomeError(
        error["name"],
        str(error.get("message", "")),
        code=error.get("code"),
        traceback=error.get("traceback"),
        cause=error.get("cause"),
    )


def warnings_of(warnings: Any) -> tuple[str, ...] | None:
    """What a delivery warned of (text); None when it sent none."""
    if warnings is None:
        return None
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise InvalidArgument("INVALID_ARGUMENT", "outcome.warnings must be a list of text")
    return tuple(warnings)
