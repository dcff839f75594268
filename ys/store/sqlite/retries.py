"""The retry client on SQLite (`protocols.RetryClient`): `ys retry` in one transaction.

A retry admits a new execution of a terminal one's workflow and starts its history with copies
of the original's steps recorded before the retry point, each with what its replay looks up:
a start step's start request (the same child, none started again), an effect step's beginning
(the effect ledger names the retry too; a settled effect replays its result, performed 0 more
times). The original's history is unchanged (terminal records never change); its
`retried_by` link names its newest retry, set in the same transaction (docs/design.md §8).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ys.contract import check_execution_id, check_time
from ys.errors import ExecutionAdmissionError, InvalidArgument, NotFoundError
from ys.store.base import Retry
from ys.store.records import Record
from ys.store.sql.retrying import (
    already_retried,
    check_retry,
    links_to,
    not_terminal,
    retry_ids,
    step_copy_event,
    steps_to_copy,
)
from ys.store.sqlite import reads
from ys.store.sqlite.core import Core
from ys.store.sqlite.executions import _admit_new, append, load


def retry_tx(
    c: sqlite3.Connection,
    execution_id: str,
    new_id: str | None,
    from_step: str | None,
    params_json: str | None,
    now: float,
    again: bool = True,
) -> Retry:
    original = load(c, execution_id)
    if original is None:
        raise NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
    if not original.terminal:
        raise not_terminal(original)
    if not again and (existing := already_retried(original)) is not None:
        return existing
    steps = reads.steps(c, execution_id)
    copied = steps_to_copy(steps, from_step)
    target = new_id
    if target is None:
        for candidate in retry_ids(execution_id):
            check_execution_id(candidate, "retry's execution ID")
            taken = c.execute(
                "SELECT 1 FROM executions WHERE execution_id=?", (candidate,)
            ).fetchone()
            if taken is None:
                target = candidate
                break
        else:
            raise InvalidArgument("INVALID_ARGUMENT", "name the retry with --id NEW")
    elif c.execute("SELECT 1 FROM executions WHERE execution_id=?", (target,)).fetchone():
        raise ExecutionAdmissionError(
            "EXECUTION_ID_CONFLICT",
            f"{target} already exists; pick another --id",
            execution_id=target,
        )
    assert target is not None
    _admit_new(
        c,
        target,
        original.workflow,
        original.params_json if params_json is None else params_json,
        original.context_json,
        None,
        now,
        original.tags,
        execution_id,
    )
    _link(c, original, target, now)  # before the copies: any failure after undoes it too
    if copied:
        record = load(c, target, payload=False)
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
            "target_id, created_at) SELECT ?, step_key, workflow, params, detached, target_id, ? "
            f"FROM start_requests WHERE caller_id=? AND step_key IN ({marks})",
            (target, now, execution_id, *keys),
        )
        c.execute(
            "INSERT OR IGNORE INTO effect_begins (effect_id, execution_id, step_key, at) "
            "SELECT effect_id, ?, step_key, ? FROM effect_begins "
            f"WHERE execution_id=? AND step_key IN ({marks})",
            (target, now, execution_id, *keys),
        )
    return Retry(target, execution_id, [s.key for s in copied])


def _link(c: sqlite3.Connection, original: Record, target: str, now: float) -> None:
    """The original's `retried_by` names the retry just admitted, if it is the newest."""
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


class SqliteRetries:
    """The retry client of one SqliteStore."""

    def __init__(self, core: Core) -> None:
        self._writer = core.writer
        self._clock = core.clock

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
        t = check_time(self._clock() if now is None else now, "now")
        return self._writer.write(
            lambda c: retry_tx(c, execution_id, new_id, from_step, params_json, t, again)
        )
