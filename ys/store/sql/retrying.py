"""A retry's checks and the events it copies, engine-neutral (no SQL): which steps it copies,
its IDs, its request checked, and whether it becomes the original's `retried_by`."""

from __future__ import annotations

from typing import Any

from ys.contract import MAX_PARAMS_BYTES, check_execution_id, check_object
from ys.errors import ExecutionNotTerminal, InvalidArgument
from ys.store.base import Retry, StepRecord
from ys.store.eventdata import StepData
from ys.store.records import STEP, Event, Record, newer_retry
from ys.store.sql.events import encode_event_value

MAX_RETRY_NUMBER = 10_000  # `<ID>.r1` .. `<ID>.r10000`: past it, name the retry with --id


def steps_to_copy(steps: list[StepRecord], from_step: str | None) -> list[StepRecord]:
    """The original's steps (in recorded order) that the retry copies: those before
    `from_step`, or before the first step that did not complete (all when every one did). A
    step still waiting among them (a sleep, a call, an effect asked again later) is left out:
    it has nothing to replay, so it runs again (a waiting call's child would wake the original,
    never the retry)."""
    if from_step is None:
        n = next((i for i, s in enumerate(steps) if s.status != "completed"), len(steps))
    else:
        n = next((i for i, s in enumerate(steps) if s.key == from_step), -1)
        if n < 0:
            known = ", ".join(repr(s.key) for s in steps[:10]) or "none"
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                f"--from {from_step!r}: the execution recorded no such step (its steps: {known})",
            )
    return [s for s in steps[:n] if s.status != "waiting"]


def not_terminal(record: Record) -> ExecutionNotTerminal:
    return ExecutionNotTerminal(
        "EXECUTION_NOT_TERMINAL",
        f"{record.execution_id} is {record.status}; only a completed, failed or cancelled "
        f"execution can be retried (cancel it first with `ys cancel {record.execution_id}`, "
        "or wait for it)",
        status=record.status,
    )


def retry_ids(execution_id: str) -> list[str]:
    """The default IDs of a retry, in the order they are tried."""
    return [f"{execution_id}.r{n}" for n in range(1, MAX_RETRY_NUMBER + 1)]


def check_retry(
    new_id: str | None, from_step: str | None, params: Any
) -> tuple[str | None, str | None]:
    """The retry's request checked before its transaction: (new ID, params JSON or None)."""
    if new_id is not None:
        check_execution_id(new_id, "new execution ID")
    if from_step is not None and (not isinstance(from_step, str) or not from_step):
        raise InvalidArgument("INVALID_ARGUMENT", "--from names a step key (non-empty text)")
    check_object(params, "params")
    params_json = encode_event_value(params, "params") if params is not None else None
    if params_json is not None and len(params_json.encode("utf-8")) > MAX_PARAMS_BYTES:
        raise InvalidArgument(  # the limit an admission has (its params are an admission's)
            "INVALID_ARGUMENT", f"params are over {MAX_PARAMS_BYTES // (1024 * 1024)} MiB encoded"
        )
    return new_id, params_json


def already_retried(record: Record) -> Retry | None:
    """What a retry that must not repeat one answers when `record` already has a retry."""
    if record.retried_by is None:
        return None
    return Retry(record.retried_by, record.execution_id, [], started=False)


def links_to(record: Record, latest: tuple[float, str] | None, new: tuple[float, str]) -> bool:
    """Whether the new retry `new` (admitted_at, ID) becomes `record`'s `retried_by`, given
    the admission of its current one (`latest`; None when it has none or gc removed it)."""
    return record.retried_by is None or newer_retry(latest, new)


def step_copy_event(s: StepRecord, original: str, at: float) -> Event:
    attempts = s.attempts if s.attempts != 1 else None
    return Event(STEP, at, StepData(s.key, s.kind, s.status, attempts, copied_from=original))
