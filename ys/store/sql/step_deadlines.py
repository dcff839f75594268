"""Step deadlines stored with the lease (docs/design.md, "Workflow options"): a worker
announces each step attempt's limit before its body runs, and the daemon writes it with the
lease it renews (`step_deadline_tx`, one fenced statement). Its daemon's timer kills the attempt
and records it (ys/daemon/limits.py); if that daemon dies first, the claim that sweeps its
expired lease records the attempt the same way (`overdue_step`, called by
ys/store/sql/limits.py). A lease's end clears the stored limit (executions.append)."""

from __future__ import annotations

import json
from typing import Any

from ys import codec
from ys.store.records import Event, Record
from ys.store.sql.executions import renew_lease
from ys.store.sql.steps import step_save
from ys.values import StepWrite


def step_deadline_tx(
    c: Any,
    execution_id: str,
    token: str,
    now: float,
    expires: float,
    key: str,
    timeout: float,
    attempts: int,
    retry_delay: float | None,
) -> float:
    """A step attempt's limit, stored with the lease it renews (fenced in one statement): if
    its daemon dies before the limit, the sweep of its lease records the attempt."""
    spec = json.dumps(
        {"key": key, "timeout": timeout, "attempts": attempts, "retry_delay": retry_delay},
        sort_keys=True,
        separators=(",", ":"),
    )
    also = (("step_deadline_at", now + timeout), ("step_deadline", spec))
    return renew_lease(c, execution_id, token, now, expires, also)


def overdue_step(c: Any, record: Record, now: float) -> tuple[Event, float | None, str] | None:
    """The step attempt whose stored limit passed while its lease lapsed, recorded as its
    daemon's timer would have (ys/daemon/limits.py): (its event, its retry's time, why)."""
    row = c.execute(
        "SELECT step_deadline FROM executions WHERE execution_id=? "
        "AND step_deadline_at IS NOT NULL AND step_deadline_at <= ?",
        (record.execution_id, now),
    ).fetchone()
    if row is None:
        return None
    spec = json.loads(row[0])
    # The announced attempt is the one that ran only while its step's row is missing or
    # waits for that attempt (a retry's): a row saved since (completed, failed and caught by
    # the workflow, or recorded by its daemon's timer) ended it, and stays as it is.
    ended = c.execute(
        "SELECT 1 FROM steps WHERE execution_id=? AND key=? "
        "AND NOT (status='waiting' AND attempts < ?)",
        (record.execution_id, spec["key"], spec["attempts"]),
    ).fetchone()
    if ended is not None:
        return None
    key, timeout = spec["key"], spec["timeout"]
    error = codec.ErrorValue(
        "StepTimeout",
        f"step {key!r} ran past its timeout of {timeout:g} s; its daemon was gone",
        "STEP_TIMEOUT",
    )
    delay = spec.get("retry_delay")
    wake = None if delay is None else now + delay
    write = StepWrite(
        "run",
        "failed" if wake is None else "waiting",
        codec.dumps(error),
        attempts=spec["attempts"],
        wake_at=wake,
    )
    event = step_save(c, record, key, write, now, error, False)
    assert event is not None
    why = f"step {key!r} ran past its timeout while its daemon was gone"
    return event, wake, why
