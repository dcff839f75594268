"""The retry client (`protocols.RetryClient`): `ys retry` in one transaction.

A retry admits a new execution of a terminal one's workflow and starts its history with copies
of the original's steps recorded before the retry point, each with what its replay looks up:
a start step's start request (the same child, none started again), an effect step's beginning
(the effect ledger names the retry too; a settled effect replays its result, performed 0 more
times). The original's history is unchanged (terminal records never change); its
`retried_by` link names its newest retry, set in the same transaction (docs/design.md, "Retries and bulk commands").

With many writers: the original is terminal, so it never changes under the retry; two
retries of one execution at once that both pick `<ID>.rN` are ordered by the insert (ON
CONFLICT DO NOTHING): the second takes the next free number. The original's row lock also
orders their `retried_by` links.
"""

from __future__ import annotations

from typing import Any

from ys.contract import check_execution_id
from ys.errors import ExecutionAdmissionError, InvalidArgument
from ys.store.base import Retry, StepRecord
from ys.store.records import Record
from ys.store.sql.core import Core
from ys.store.sql.executions import admit_new, append, load, not_found
from ys.store.sql.retrying import (
    already_retried,
    check_retry,
    links_to,
    not_terminal,
    retry_ids,
    step_copy_event,
    steps_to_copy,
)
from ys.store.sql.steps import STEP_COLUMNS


def retry_tx(
    c: Any,
    execution_id: str,
    new_id: str | None,
    from_step: str | None,
    params_json: str | None,
    now: float,
    again: bool = True,
) -> Retry:
    original = load(c, execution_id, lock=True)  # gc waits: the copies come out whole
    if original is None:
        raise not_found(execution_id)
    if not original.terminal:
        raise not_terminal(original)
    if not again and (existing := already_retried(original)) is not None:
        return existing
    steps = [
        StepRecord(*r)
        for r in c.execute(
            f"SELECT {STEP_COLUMNS} FROM steps WHERE execution_id=? ORDER BY first_seq",
            (execution_id,),
        ).fetchall()
    ]
    copied = steps_to_copy(steps, from_step)
    params = original.params_json if params_json is None else params_json
    args = (original.workflow, params, original.context_json, None, now, original.tags)
    target: str | None = None
    if new_id is not None:
        if not admit_new(c, new_id, *args, execution_id):
            raise ExecutionAdmissionError(
                "EXECUTION_ID_CONFLICT",
                f"{new_id} already exists; pick another --id",
                execution_id=new_id,
            )
        target = new_id
    else:
        for candidate in retry_ids(execution_id):
            check_execution_id(candidate, "retry's execution ID")
            taken = c.execute(
                "SELECT 1 FROM executions WHERE execution_id=?", (candidate,)
            ).fetchone()
            if taken is None and admit_new(c, candidate, *args, execution_id):
                target = candidate
                break
        if target is None:
            raise InvalidArgument("INVALID_ARGUMENT", "name the retry with --id NEW")
    _link(c, original, target, now)  # before the copies: any failure after undoes it too
    if copied:
        record = load(c, target, payload=False, lock=True)
        assert record is not None
        first = record.history_length + 1
        c.executemany(
            "INSERT INTO steps (execution_id, key, kind, status, value, attempts, wake_at, "
            "updated_at, first_seq) VALUES (?,?,?,?,?,?,NULL,?,?)",
            [
                (target, s.key, s.kind, s.status, s.value, s.attempts, now, first + i)
                for i, s in enumerate(copied)
            ],
        )
        append(c, record, [step_copy_event(s, execution_id, now) for s in copied])
        keys = [s.key for s in copied]
        marks = ",".join("?" * len(keys))
        c.execute(
            "INSERT INTO start_requests (caller_id, step_key, workflow, params, detached, "
            "target_id, created_at) SELECT ?, step_key, workflow, params, detached, target_id, "
            f"? FROM start_requests WHERE caller_id=? AND step_key IN ({marks})",
            (target, now, execution_id, *keys),
        )
        c.execute(
            "INSERT INTO effect_begins (effect_id, execution_id, step_key, at) "
            "SELECT effect_id, ?, step_key, ? FROM effect_begins "
            f"WHERE execution_id=? AND step_key IN ({marks}) ON CONFLICT DO NOTHING",
            (target, now, execution_id, *keys),
        )
    return Retry(target, execution_id, [s.key for s in copied])


def _link(c: Any, original: Record, target: str, now: float) -> None:
    """The original's `retried_by` names the retry just admitted, if it is the newest (the
    original's row is locked: retries of one execution link one at a time)."""
    latest = None
    if original.retried_by is not None:
        row = c.execute(
            "SELECT admitted_at FROM executions WHERE execution_id=?", (original.retried_by,)
        ).fetchone()
        latest = None if row is None else (row[0], original.retried_by)
    if links_to(original, latest, (now, target)):
        c.execute(
            "UPDATE executions SET retried_by=? WHERE execution_id=?",
            (target, original.execution_id),
        )


class Retries:
    """The retry client of one store."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def retry(
        self,
        execution_id: str,
        *,
        new_id: str | None = None,
        from_step: str | None = None,
        params: Any = None,
        again: bool = True,
        now: float | None = None,
    ) -> Retry:
        check_execution_id(execution_id)
        new_id, params_json = check_retry(new_id, from_step, params)
        t = self._core.now(now)
        result: Retry = self._core.write(
            lambda c: retry_tx(c, execution_id, new_id, from_step, params_json, t, again)
        )
        return result
