"""Steps, engine-neutral: a claimed execution's state for its worker, and one step's save
(its row and the event its history gains). `ph` is the connection's placeholder."""

from __future__ import annotations

from typing import Any

from ys import codec
from ys.store.eventdata import StepData
from ys.store.records import STEP, TERMINAL, Event, Record
from ys.values import StepWrite

STEP_COLUMNS = "key, kind, status, value, attempts, wake_at, updated_at"


def step_error(value: str | None, status: str) -> codec.ErrorValue | None:
    """The error a step's value holds (a failed attempt, or a retry waiting after one); None
    for any other value. Only a tagged error's text starts so: a user key
    "$error" is written "$$error". A shell step's failed attempt keeps its exit status and
    output beside its error: {"error": <error>, "status": N, "stdout"...} (its first key)."""
    if value is None or status == "completed":
        return None
    if value.startswith('{"error":{"$error":'):
        shell = codec.decode(value)
        error = shell.get("error") if isinstance(shell, dict) else None
    elif value.startswith('{"$error":'):
        error = codec.decode(value)
    else:
        return None
    return error if isinstance(error, codec.ErrorValue) else None


def step_save(
    c: Any,
    record: Record,
    key: str,
    step: StepWrite,
    now: float,
    error: codec.ErrorValue | None,
    done: bool,
) -> Event | None:
    """Write one step's row and return the event its history gains, or None when the step is
    already completed (`done`, read with the execution's row: a completed step is final: a
    later save of it, the daemon recording a step's timeout just as the step's own save
    committed, changes nothing)."""
    ph = "?"
    execution_id = record.execution_id
    kind, status, value, wake_at = step.kind, step.status, step.value, step.wake_at
    attempts = step.attempts
    if done:
        return None
    if kind == "call" and status == "waiting":
        # The child may have ended before this step said it waits: then nobody would wake us.
        child = c.execute(
            "SELECT e.status FROM start_requests s JOIN executions e ON e.execution_id=s.target_id"
            f" WHERE s.caller_id={ph} AND s.step_key={ph}",
            (execution_id, key),
        ).fetchone()
        if child is not None and child[0] in TERMINAL:
            wake_at = now
    marks = ",".join([ph] * 9)
    c.execute(
        "INSERT INTO steps (execution_id, key, kind, status, value, attempts, wake_at, "
        f"updated_at, first_seq) VALUES ({marks}) ON CONFLICT (execution_id, key) DO UPDATE SET "
        "kind=excluded.kind, status=excluded.status, value=excluded.value, "
        "attempts=excluded.attempts, wake_at=excluded.wake_at, updated_at=excluded.updated_at",
        (execution_id, key, kind, status, value, attempts, wake_at, now, record.history_length + 1),
    )
    # The history keeps each failed attempt's error: the step's row keeps only its last
    # value, which a retry that succeeds replaces with the result.
    data = StepData(
        key,
        kind,
        status,
        attempts if attempts != 1 else None,
        wake_at,
        error.to_json() if error is not None else None,
    )
    return Event(STEP, now, data)
