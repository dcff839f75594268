"""Execution records and their events: `apply` is the only code that changes a record.

A record is a fold of its history. Every store write computes events, folds them with `apply`,
and persists both in one transaction; `verify` re-folds stored histories and compares.
Lease tokens and expiries are not part of the record: they are the dispatcher's working state
(renewals are heartbeats, not history), kept beside it by the adapter.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ys.store.eventdata import (
    KNOWN_KINDS,
    AdmittedData,
    CancelledData,
    CancelRequestedData,
    ClaimedData,
    CompletedData,
    EventData,
    FailedData,
    Parent,
    ReleasedData,
    StepData,
    SuspendedData,
    UnknownData,
    WakeRequestedData,
    error_of_json,
)
from ys.values import Outcome

STATUSES = ("admitted", "running", "suspended", "completed", "failed", "cancelled")
TERMINAL = frozenset({"completed", "failed", "cancelled"})

# kinds of events, in the order a typical execution sees them
ADMITTED = "admitted"
WAKE_REQUESTED = "wake_requested"
CLAIMED = "claimed"
STEP = "step"
RELEASED = "released"  # a delivery ended without an outcome (lease expired, worker crashed)
SUSPENDED = "suspended"
CANCEL_REQUESTED = "cancel_requested"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"


@dataclass(frozen=True)
class Event:
    kind: str  # the kind its data is of (`data.KIND`)
    at: float
    data: EventData


@dataclass(frozen=True)
class Record:
    execution_id: str
    workflow: str
    params_json: (
        str  # canonical encoding, as admitted ("" when a write loaded the record without it)
    )
    context_json: str
    status: str
    outcome: Outcome | None  # set by the terminal event
    admitted_at: float
    updated_at: float
    due_at: float | None  # earliest pending wake not covered by the current delivery
    covered_due_at: float | None  # the wake the current delivery covers
    prior_status: str | None  # status before the current claim, restored on release
    attempts: int
    parent: Parent | None
    cancel_requested: bool
    history_length: int
    script_sha256: str | None = None  # the workflow script's version at admission
    tags: dict[str, str] = dataclasses.field(default_factory=dict)  # copied to children, retries
    retry_of: str | None = None  # the execution this one retries (`ys retry`)
    # The newest execution whose `retry_of` names this one: not folded from this record's own
    # history (a terminal record's history never grows) but from its retries' admitted events
    # (`newest_retries`), and set in the transaction that admits each retry.
    retried_by: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class RawJSON(str):
    """Canonical JSON text that an event carries as is (params are encoded once, at admission)."""


def _raw(value: Any) -> str:
    """Canonical text of a value read back from a stored event (already in codec form)."""
    if isinstance(value, RawJSON):
        return str(value)
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def outcome_of_json(data: dict[str, Any]) -> Outcome:
    """A stored record's outcome column (`Outcome.to_json`) as the record keeps it."""
    status = data["status"]
    if status == COMPLETED:
        return Outcome(status, result=data.get("result"))
    if status == FAILED:
        return Outcome(status, error=error_of_json(data["error"]))
    return Outcome(status)


def _min(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a <= b else b


def apply(record: Record | None, event: Event) -> Record:
    """The record after one more event. Pure: the same at commit time and at recovery."""
    d = event.data
    if record is None:
        if not isinstance(d, AdmittedData):
            raise ValueError(f"the first event must be admitted, not {event.kind}")
        return Record(
            execution_id=d.execution_id,
            workflow=d.workflow,
            params_json=_raw(d.params),
            context_json=_raw(d.context or {}),
            status="admitted",
            outcome=None,
            admitted_at=event.at,
            updated_at=event.at,
            due_at=event.at if d.due_at is None else d.due_at,  # `ys trigger --in/--at`
            covered_due_at=None,
            prior_status=None,
            attempts=0,
            parent=d.parent,
            cancel_requested=False,
            history_length=1,
            script_sha256=d.script_sha256,
            tags=dict(d.tags or {}),
            retry_of=d.retry_of,
        )
    r = dataclasses.replace(record, updated_at=event.at, history_length=record.history_length + 1)
    if isinstance(d, AdmittedData):
        raise ValueError("an execution is admitted once")
    if r.status in TERMINAL:
        # Terminal records never change (callers must not write such events).
        raise ValueError(f"{event.kind} after terminal status {r.status}")
    match d:
        case WakeRequestedData():
            return dataclasses.replace(r, due_at=_min(r.due_at, d.due_at))
        case ClaimedData():
            return dataclasses.replace(
                r,
                status="running",
                prior_status=r.status,
                covered_due_at=r.due_at,
                due_at=None,
                attempts=r.attempts + 1,
            )
        case StepData():
            # Only a waiting step's wake is pending: a finished step (a sleep completed by the
            # delivery its wake woke) keeps the time it waited for as a fact, not a new wake.
            if d.wake_at is None or not d.waiting:
                return r
            return dataclasses.replace(r, due_at=_min(r.due_at, d.wake_at))
        case ReleasedData():
            # The covered wakes stay pending; they become due again after the retry delay.
            retry_at = event.at if d.retry_at is None else d.retry_at
            covered = r.covered_due_at if r.covered_due_at is not None else retry_at
            return dataclasses.replace(
                r,
                status=r.prior_status or "admitted",
                prior_status=None,
                covered_due_at=None,
                due_at=_min(r.due_at, max(covered, retry_at)),
            )
        case SuspendedData():
            return dataclasses.replace(
                r, status="suspended", prior_status=None, covered_due_at=None
            )
        case CancelRequestedData():
            return dataclasses.replace(r, cancel_requested=True, due_at=_min(r.due_at, event.at))
        case CompletedData():
            return _ended(r, Outcome(COMPLETED, result=d.result))
        case FailedData():
            return _ended(r, Outcome(FAILED, error=d.outcome_error()))
        case CancelledData():
            return _ended(r, Outcome(CANCELLED))
    if isinstance(d, UnknownData) and event.kind in KNOWN_KINDS:
        raise ValueError(f"a {event.kind} event whose data does not read as a {event.kind}'s")
    raise ValueError(f"unknown event kind {event.kind!r}")


def _ended(r: Record, outcome: Outcome) -> Record:
    return dataclasses.replace(
        r,
        status=outcome.status,
        outcome=outcome,
        due_at=None,
        covered_due_at=None,
        prior_status=None,
    )


def newer_retry(a: tuple[float, str] | None, b: tuple[float, str]) -> bool:
    """Whether retry `b` (admitted_at, execution_id) is newer than `a`: later admitted, ties
    by the greater ID; the rule `retried_by` follows at every retry and on re-folding."""
    return a is None or b > a


def newest_retries(records: list[Record]) -> dict[str, str]:
    """Each retried execution's newest retry among `records` (folded from their histories):
    what each original's `retried_by` must be."""
    newest: dict[str, tuple[float, str]] = {}
    for r in records:
        if r.retry_of is not None and newer_retry(
            newest.get(r.retry_of), (r.admitted_at, r.execution_id)
        ):
            newest[r.retry_of] = (r.admitted_at, r.execution_id)
    return {original: by for original, (_, by) in newest.items()}


def fold(events: list[Event]) -> Record:
    record: Record | None = None
    for e in events:
        record = apply(record, e)
    if record is None:
        raise ValueError("an empty history has no record")
    return record
