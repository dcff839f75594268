"""Hard timeouts, attempt caps and cancel-at-once on SQLite (DESIGN.md §7): each ends an
execution without its worker, in one transaction that also drops the lease (so the worker's
later writes are refused: it is fenced), wakes a caller waiting on it and, for a failure,
admits its failure handler.

- `time_out_tx`: a live execution past `deadline_at` (its admission time plus its
  workflow's timeout, set at admission) fails with error name `TimeoutError`.
- `release_counted_tx`: a delivery that ended without an outcome (reason `worker_failed`)
  is released as before, unless it was the `max_attempts`-th such delivery: then the
  execution fails `DeliveryAttemptsExhausted`. Releases for other reasons (a daemon stop,
  recovery, an expired lease swept by a claim) do not count.
- `cancel_now_tx`: the cancellation request, and the execution ends `cancelled` at once.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ys.errors import NotFoundError
from ys.store.records import CANCELLED, FAILED, RELEASED, Event, Record
from ys.store.sqlite.executions import (
    append,
    check_lease,
    clear_lease,
    load,
    wake_waiting_parent,
)
from ys.store.sqlite.starts import cancel_tx

COUNTED = "worker_failed"  # the release reason that counts toward max_attempts
# How a counted release's event reads (canonical JSON: sorted keys, no spaces)
_COUNTED_LIKE = '%"reason":"' + COUNTED + '"%'


def end_tx(
    c: sqlite3.Connection, record: Record, events: list[Event], now: float, on_failure: str | None
) -> Record:
    """Append the events that end `record`, drop its lease, wake its waiting caller and (for
    a failure) admit its handler: what an acknowledged outcome does, without a worker."""
    record = append(c, record, events)
    clear_lease(c, record.execution_id)
    if record.parent is not None:
        wake_waiting_parent(c, record, now)
    if record.status == FAILED and on_failure is not None:
        from ys.store.sqlite.handlers import failure_handler_tx

        failure_handler_tx(c, record, on_failure, now)
    return record


def timed_out(c: sqlite3.Connection, now: float, limit: int) -> list[tuple[str, str]]:
    """(execution ID, workflow) of live executions past their deadline, earliest first."""
    rows = c.execute(
        "SELECT execution_id, workflow FROM executions WHERE deadline_at IS NOT NULL "
        "AND deadline_at <= ? ORDER BY deadline_at LIMIT ?",
        (now, limit),
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def time_out_tx(
    c: sqlite3.Connection, execution_id: str, now: float, on_failure: str | None
) -> bool:
    """Fail the execution with TimeoutError if it is live and past its deadline (checked
    here, in the transaction that fails it); False when it is not."""
    row = c.execute(
        "SELECT deadline_at, admitted_at FROM executions WHERE execution_id=?", (execution_id,)
    ).fetchone()
    if row is None or row[0] is None or row[0] > now:
        return False
    record = load(c, execution_id, payload=False)
    if record is None or record.terminal:  # a terminal one has no deadline: never here
        return False
    limit = row[0] - row[1]
    error = {
        "name": "TimeoutError",
        "message": f"the execution did not end within its timeout of {_seconds(limit)}",
        "code": "TIMEOUT",
    }
    end_tx(c, record, [Event(FAILED, now, {"error": error})], now, on_failure)
    return True


def release_counted_tx(
    c: sqlite3.Connection,
    execution_id: str,
    token: str,
    now: float,
    data: dict[str, Any],
    max_attempts: int | None,
    on_failure: str | None,
) -> bool:
    """Release the delivery (fenced by its token); True when this was the last delivery its
    attempt cap allows, and the execution failed DeliveryAttemptsExhausted instead."""
    check_lease(c, execution_id, token, now)
    record = load(c, execution_id, payload=False)
    assert record is not None
    release = Event(RELEASED, now, data)
    if data.get("reason") != COUNTED or max_attempts is None:
        append(c, record, [release])
        clear_lease(c, execution_id)
        return False
    (earlier,) = c.execute(
        "SELECT COUNT(*) FROM events WHERE execution_id=? AND kind=? AND data LIKE ?",
        (execution_id, RELEASED, _COUNTED_LIKE),
    ).fetchone()
    if earlier + 1 < max_attempts:
        append(c, record, [release])
        clear_lease(c, execution_id)
        return False
    error = {
        "name": "DeliveryAttemptsExhausted",
        "message": exhausted_message(earlier + 1, max_attempts, data.get("detail")),
        "code": "DELIVERY_ATTEMPTS_EXHAUSTED",
    }
    end_tx(c, record, [release, Event(FAILED, now, {"error": error})], now, on_failure)
    return True


def cancel_now_tx(c: sqlite3.Connection, execution_id: str, now: float) -> bool:
    """Request the cancellation (its attached children too) and end the execution
    `cancelled` at once; False when it had already ended."""
    record = load(c, execution_id, payload=False)
    if record is None:
        raise NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
    if record.terminal:
        return False
    cancel_tx(c, execution_id, now)
    record = load(c, execution_id, payload=False)
    assert record is not None
    end_tx(c, record, [Event(CANCELLED, now, {"at_once": True})], now, None)
    return True


def exhausted_message(deliveries: int, max_attempts: int, detail: str | None) -> str:
    last = f"; the last: {detail}" if detail else ""
    return f"{deliveries} deliveries ended without an outcome (max_attempts={max_attempts}){last}"


def _seconds(s: float) -> str:
    return f"{s:g} s"
