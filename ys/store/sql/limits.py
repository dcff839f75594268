"""Hard timeouts, attempt caps and cancel-at-once (docs/design.md, "Workflow options"): each ends an
execution without its worker, in one transaction that also drops the lease (so the worker's
later writes are refused: it is fenced), wakes a caller waiting on it and, for a failure,
admits its failure handler.

- `time_out_tx`: a live execution past `deadline_at` (its admission time plus its
  workflow's timeout, set at admission) fails with error name `TimeoutError`.
- `release_counted_tx`: a delivery that ended without an outcome (reason `worker_failed`)
  is released as before, unless it was the `max_attempts`-th such delivery: then the
  execution fails `DeliveryAttemptsExhausted`. A lease that expired (swept by any daemon's
  claim: its daemon was killed or frozen past it, on this box or another) counts too, so the
  cap holds across daemons whose deliveries die with them. Releases for other reasons (a
  daemon stop, recovery at a daemon's start) do not count.
- `cancel_now_tx`: the cancellation request, and the execution ends `cancelled` at once.
- `release_lost_tx`: a lease that expired, swept by any daemon's claim. It counts toward
  the workflow's `max_attempts` as recorded with its current script (`scripts`), and fails
  the execution when that was the last; a step attempt whose stored deadline passed
  (ys/store/sql/step_deadlines.py: its daemon died before its timer fired) is recorded as the daemon
  would have (`StepTimeout`, or waiting for its retry), and the release then does not count.

Each locks the execution's row first (where rows are locked: two daemons never both end it,
and a worker's write waiting for the row finds its lease gone). Timed out and cancelled at
once, an execution keeps its concurrency slot until its worker is known gone
(concurrency.hold).
"""

from __future__ import annotations

from typing import Any

from ys.store.eventdata import CancelledData, FailedData, JsonObject, ReleasedData
from ys.store.records import CANCELLED, FAILED, RELEASED, Event, Record
from ys.store.sql import concurrency
from ys.store.sql.executions import (
    append,
    load,
    load_leased,
    not_found,
    wake_waiting_parent,
)
from ys.store.sql.starts import cancel_tx
from ys.store.sql.step_deadlines import overdue_step
from ys.store.sql.versions import attempts_cap

COUNTED = "worker_failed"  # the release reason that counts toward max_attempts
LOST = "lease_expired"  # a delivery whose lease was lost: counted with the others
# How a counted release's event reads (canonical JSON: sorted keys, no spaces)
_COUNTED_LIKE = '%"reason":"' + COUNTED + '"%'
_LOST_LIKE = '%"reason":"' + LOST + '"%'


def end_tx(
    c: Any,
    record: Record,
    events: list[Event],
    now: float,
    on_failure: str | None,
    hold_slot: bool = False,
) -> Record:
    """Append the events that end `record` (its row locked), drop its lease, wake its waiting
    caller and (for a failure) admit its handler. `hold_slot`: it ends without its worker,
    which may still run: a slot its lease held stays held (concurrency.hold)."""
    if hold_slot:
        holder = ", lease_holder" if c.dialect.owned_leases else ""
        slot, token, expires, *owner = c.execute(
            f"SELECT slot, lease_token, lease_expires_at{holder} FROM executions "
            "WHERE execution_id=?",
            (record.execution_id,),
        ).fetchone()
        record = append(c, record, events, clear_lease=True, slot=None)
        concurrency.hold(c, record.execution_id, slot if token else None, expires, *owner)
    else:
        record = append(c, record, events, clear_lease=True)
    if record.parent is not None:
        wake_waiting_parent(c, record, now)
    if record.status == FAILED and on_failure is not None:
        from ys.store.sql.handlers import failure_handler_tx

        failure_handler_tx(c, record, on_failure, now)
    return record


def timed_out(c: Any, now: float, limit: int) -> list[tuple[str, str]]:
    rows = c.execute(
        "SELECT execution_id, workflow FROM executions WHERE deadline_at IS NOT NULL "
        "AND deadline_at <= ? ORDER BY deadline_at LIMIT ?",
        (now, limit),
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def time_out_tx(c: Any, execution_id: str, now: float, on_failure: str | None) -> bool:
    record = load(c, execution_id, payload=False, lock=True)
    if record is None or record.terminal:
        return False
    row = c.execute(
        "SELECT deadline_at FROM executions WHERE execution_id=?", (execution_id,)
    ).fetchone()
    if row is None or row[0] is None or row[0] > now:
        return False
    error: JsonObject = {
        "name": "TimeoutError",
        "message": (
            f"the execution did not end within its timeout of {row[0] - record.admitted_at:g} s"
        ),
        "code": "TIMEOUT",
    }
    end_tx(c, record, [Event(FAILED, now, FailedData(error))], now, on_failure, hold_slot=True)
    return True


def release_counted_tx(
    c: Any,
    execution_id: str,
    token: str,
    now: float,
    data: ReleasedData,
    max_attempts: int | None,
    on_failure: str | None,
) -> bool:
    """A delivery's release by its daemon; counted (`max_attempts` given: the daemon's cap,
    where the store has none recorded for the workflow) it may be the last one."""
    record = load_leased(c, execution_id, token, now)
    release = Event(RELEASED, now, data)
    if data.reason != COUNTED or max_attempts is None:
        append(c, record, [release], token=token, clear_lease=True)
        return False
    cap, handler = attempts_cap(c, record.workflow)
    return _count(
        c, record, [release], now, cap or max_attempts, handler or on_failure, data, token
    )


def _count(
    c: Any,
    record: Record,
    events: list[Event],
    now: float,
    cap: int,
    on_failure: str | None,
    data: ReleasedData,
    token: str | None = None,
) -> bool:
    """Release `record` with `events` (the release last), failing it if that release was the
    `cap`-th counted one; whether it failed."""
    (earlier,) = c.execute(
        "SELECT COUNT(*) FROM events WHERE execution_id=? AND kind=? "
        "AND (data LIKE ? OR data LIKE ?)",
        (record.execution_id, RELEASED, _COUNTED_LIKE, _LOST_LIKE),
    ).fetchone()
    if earlier + 1 < cap:
        append(c, record, events, token=token, clear_lease=True)
        return False
    error: JsonObject = {
        "name": "DeliveryAttemptsExhausted",
        "message": exhausted_message(earlier + 1, cap, data.detail),
        "code": "DELIVERY_ATTEMPTS_EXHAUSTED",
    }
    end_tx(c, record, [*events, Event(FAILED, now, FailedData(error))], now, on_failure)
    return True


def release_lost_tx(c: Any, execution_id: str, now: float) -> bool:
    """Release an expired lease (any daemon's, swept by a claim; its row not locked yet):
    its overdue step attempt recorded, the release counted; whether the execution failed."""
    record = load(c, execution_id, payload=False, lock=True)
    assert record is not None
    events, data = release_events(c, record, now, LOST)
    cap, handler = attempts_cap(c, record.workflow)
    if cap is None or data.reason != LOST:
        append(c, record, events, clear_lease=True)
        return False
    return _count(c, record, events, now, cap, handler, data)


def release_events(
    c: Any, record: Record, now: float, reason: str
) -> tuple[list[Event], ReleasedData]:
    """The events that release `record`'s lease (its row locked) without its daemon, for
    `reason`, and the release's data: its step attempt whose stored deadline passed recorded
    first as its daemon's timer would have (the release's reason is then `step_timeout`)."""
    data = ReleasedData(reason, now)
    step = overdue_step(c, record, now)
    if step is None:
        return [Event(RELEASED, now, data)], data
    data = ReleasedData("step_timeout", step[1] or now, step[2])
    return [step[0], Event(RELEASED, now, data)], data


def cancel_now_tx(c: Any, execution_id: str, now: float) -> bool:
    record = load(c, execution_id, payload=False, lock=True)
    if record is None:
        raise not_found(execution_id)
    if record.terminal:
        return False
    cancel_tx(c, execution_id, now)
    record = load(c, execution_id, payload=False, lock=True)
    assert record is not None
    end_tx(
        c, record, [Event(CANCELLED, now, CancelledData(at_once=True))], now, None, hold_slot=True
    )
    return True


def exhausted_message(deliveries: int, max_attempts: int, detail: str | None) -> str:
    last = f"; the last: {detail}" if detail else ""
    return f"{deliveries} deliveries ended without an outcome (max_attempts={max_attempts}){last}"
