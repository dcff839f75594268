"""The execution client, on any SQL adapter's core: admission, wakes, claims, leases, steps, outcomes and
cancellation (`protocols.ExecutionClient`).

Every write runs through the writer (its own transaction, or its share of a group commit) and
is a transaction body of `executions` (or `starts.cancel_tx`): it computes events, folds them
with `apply`, and persists events and projection together. An admission computes its rows
before the transaction (`_admission`) where the core takes prepared rows (SQLite's group
writer inserts a batch of them with one statement per table). The hot paths (admit_async, save_step_async, claim_due) do
their checks here, outside the transaction, and nothing more per call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Unpack, cast

from ys import codec
from ys.contract import (
    MAX_PARAMS_BYTES,
    check_execution_id,
    check_object,
    check_tags,
    check_time,
    check_workflow_name,
)
from ys.errors import InvalidArgument, LeaseLost
from ys.store.base import (
    Admission,
    AdmissionContext,
    AdmitOptions,
    Claimed,
    Parent,
    StepRecord,
)
from ys.store.eventdata import ReleasedData
from ys.store.lean import LeanWrites
from ys.store.records import Record
from ys.store.sql import claims, concurrency
from ys.store.sql.core import Core
from ys.store.sql.events import encode_event_value, new_execution_id, outcome_event
from ys.store.sql.executions import (
    acknowledge_tx,
    admit_tx,
    not_found,
    request_wake_tx,
    save_step_tx,
    suspend_tx,
    wake_workflow_tx,
)
from ys.store.sql.limits import cancel_now_tx, release_counted_tx, time_out_tx, timed_out
from ys.store.sql.rows import FULL, row_to_record
from ys.store.sql.starts import cancel_tx
from ys.store.sql.step_deadlines import step_deadline_tx
from ys.store.sql.steps import STEP_COLUMNS, step_error
from ys.values import Outcome, StepWrite

HEAL_EVERY = 1.0  # seconds: how often claims look for waiters of free slots (concurrency.heal)


class Executions(LeanWrites):
    """The execution client of one store."""

    def __init__(self, core: Core) -> None:
        self._core = core
        # the core's write, write_async and submit (LeanWrites' too): one lookup per write
        self._writer: Core = core
        self._clock = core.clock
        # the last claim that healed slot waiters (one round trip more, at most once a
        # second); none at start: the daemon's recovery made every waiter claimable
        self._healed_at = core.clock()

    def _now(self, now: float | None) -> float:
        """The time of a write: the clock's, or the caller's `now` (checked like every time
        the store is given)."""
        return self._clock() if now is None else check_time(now, "now")

    # -- admission --------------------------------------------------------------------------

    def admit(self, workflow: str, params: Any = None, **given: Unpack[AdmitOptions]) -> Admission:
        return self._writer.write(*self._admission(workflow, params, **given))

    async def admit_async(
        self,
        workflow: str,
        params: Any = None,
        *,
        lease_seconds: float | None = None,
        **given: Unpack[AdmitOptions],
    ) -> Admission:
        """`admit` for the daemon's event loop: checked and encoded here, committed by the
        group writer with the other admissions of its batch, answered with one wake-up."""
        fn, inserts, value = self._admission(workflow, params, **given)
        if lease_seconds is None:
            return await self._writer.write_async(fn, inserts, value)
        t, lease = self._now(given.get("now")), lease_seconds
        due_at = given.get("due_at")
        holder, pid = self._core.holder, self._core.pid

        def tx(c: Any) -> Admission:
            admission = fn(c)
            if not admission.started or (due_at is not None and due_at > t):
                return admission  # due later: a claim takes it when it is due
            delivery = claims.claim_new(c, admission.execution_id, t, lease, holder, pid)
            return replace(admission, delivery=delivery)

        return await self._writer.write_async(tx)

    def _admission(
        self,
        workflow: str,
        params: Any,
        *,
        context: AdmissionContext | None = None,
        execution_id: str | None = None,
        if_exists: str = "fail",
        parent: Parent | None = None,
        now: float | None = None,
        tags: dict[str, str] | None = None,
        due_at: float | None = None,
    ) -> tuple[Callable[[Any], Admission], Any, Admission | None]:
        """An admission checked and prepared (`admit` and `admit_async` alike, their options
        `AdmitOptions`): its transaction body and, where the core takes
        them, its rows computed as if the ID were unused (the common case), so that the group
        writer can insert many admissions at once; if the ID is taken, the body runs and
        decides."""
        check_workflow_name(workflow)
        if execution_id is not None:
            check_execution_id(execution_id)
        if if_exists not in ("fail", "use-existing"):
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"if_exists must be 'fail' or 'use-existing', not {if_exists!r}"
            )
        check_object(params, "params")
        if context is not None and not isinstance(context, AdmissionContext):
            raise InvalidArgument("INVALID_ARGUMENT", "context must be an AdmissionContext")
        params_json = encode_event_value({} if params is None else params, "params")
        if len(params_json.encode("utf-8")) > MAX_PARAMS_BYTES:
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                f"params are {len(params_json.encode())} bytes encoded; the limit is 2 MiB",
            )
        context_json = "{}" if context is None else encode_event_value(context.to_json(), "context")
        tag_map = check_tags(tags)
        at = check_time(self._now(now), "the admission time")  # the clock's reading too
        due = None if due_at is None else check_time(due_at, "due_at (the first wake)")

        def tx(c: Any) -> Admission:
            return admit_tx(
                c,
                workflow,
                params_json,
                context_json,
                execution_id,
                if_exists,
                parent,
                at,
                tag_map,
                due,
            )

        if not self._core.prepares:
            return tx, None, None
        new_id = new_execution_id(workflow, at) if execution_id is None else execution_id
        inserts = self._core.admission_rows(
            new_id, workflow, params_json, context_json, parent, at, tag_map, due
        )
        return tx, inserts, Admission(new_id, started=True)

    # -- wakes and deliveries ---------------------------------------------------------------

    def request_wake(
        self,
        execution_id: str,
        at: float | None = None,
        *,
        now: float | None = None,
        reason: str = "requested",
    ) -> str:
        t = self._now(now)
        due = t if at is None else check_time(at, "at (the wake time)")
        return self._writer.write(lambda c: request_wake_tx(c, execution_id, due, t, reason))

    def wake_workflow(self, workflow: str, *, now: float | None = None) -> int:
        t = self._now(now)
        return self._writer.write(lambda c: wake_workflow_tx(c, workflow, t))

    def claim_due(
        self,
        now: float | None = None,
        limit: int = 10,
        lease_seconds: float | None = None,
    ) -> Claimed:
        return self._writer.write(self._claim(now, limit, lease_seconds))

    def _claim(
        self, now: float | None, limit: int, lease_seconds: float | None
    ) -> Callable[[Any], Claimed]:
        t = self._now(now)
        lease = self._core.lease_seconds if lease_seconds is None else lease_seconds
        heal = not 0 <= t - self._healed_at < HEAL_EVERY
        if heal:
            self._healed_at = t
        holder, pid = self._core.holder, self._core.pid
        # a Later on a pipelining writer, which settles it before answering (requests.py)
        return cast(
            Callable[[Any], Claimed],
            lambda c: claims.claim_due_tx(c, t, limit, lease, holder, pid, heal),
        )

    def release_expired(self, now: float | None = None) -> list[str]:
        t = self._now(now)
        return self._writer.write(lambda c: claims.release_expired_tx(c, t, limit=None))

    def free_slot(self, execution_id: str) -> bool:
        return self._writer.write(lambda c: concurrency.free_held(c, execution_id))

    def step_deadline(
        self,
        execution_id: str,
        token: str,
        key: str,
        *,
        timeout: float,
        attempts: int,
        retry_delay: float | None = None,
        now: float | None = None,
        lease_seconds: float | None = None,
    ) -> float:
        t = self._now(now)
        check_time(timeout, "timeout")
        expires = t + (self._core.lease_seconds if lease_seconds is None else lease_seconds)
        return self._writer.write(
            lambda c: step_deadline_tx(
                c, execution_id, token, t, expires, key, timeout, attempts, retry_delay
            )
        )

    def renew(
        self,
        execution_id: str,
        token: str,
        *,
        now: float | None = None,
        lease_seconds: float | None = None,
    ) -> float:
        return self._writer.write(self._renew(execution_id, token, now, lease_seconds))

    async def renew_async(
        self,
        execution_id: str,
        token: str,
        *,
        now: float | None = None,
        lease_seconds: float | None = None,
    ) -> float:
        return await self._writer.write_async(self._renew(execution_id, token, now, lease_seconds))

    def _renew(
        self, execution_id: str, token: str, now: float | None, lease_seconds: float | None
    ) -> Callable[[Any], float]:
        t = self._now(now)
        expires = t + (self._core.lease_seconds if lease_seconds is None else lease_seconds)
        return lambda c: claims.renew_tx(c, execution_id, token, t, expires)

    def release(
        self,
        execution_id: str,
        token: str,
        *,
        retry_at: float | None = None,
        reason: str = "retry",
        now: float | None = None,
        detail: str | None = None,
        max_attempts: int | None = None,
        on_failure: str | None = None,
    ) -> bool:
        t = self._now(now)
        retry = check_time(retry_at, "retry_at") if retry_at else t
        data = ReleasedData(reason, retry, detail[-2000:] if detail else None)
        if on_failure is not None:
            check_workflow_name(on_failure)
        return self._writer.write(
            lambda c: release_counted_tx(c, execution_id, token, t, data, max_attempts, on_failure)
        )

    def timed_out(self, now: float | None = None, limit: int = 100) -> list[tuple[str, str]]:
        t = self._now(now)
        return self._core.read(lambda c: timed_out(c, t, limit))

    def time_out(
        self, execution_id: str, *, now: float | None = None, on_failure: str | None = None
    ) -> bool:
        t = self._now(now)
        if on_failure is not None:
            check_workflow_name(on_failure)
        return self._writer.write(lambda c: time_out_tx(c, execution_id, t, on_failure))

    def acknowledge(
        self,
        execution_id: str,
        token: str,
        outcome: Outcome,
        *,
        now: float | None = None,
        on_failure: str | None = None,
    ) -> Outcome:
        """Record the outcome; a failure admits the `on_failure` workflow in the same
        transaction (`<ID>.on-failure`, ys.store.sql.handlers)."""
        return self._writer.write(self._acknowledge(execution_id, token, outcome, now, on_failure))

    async def acknowledge_async(
        self,
        execution_id: str,
        token: str,
        outcome: Outcome,
        *,
        now: float | None = None,
        on_failure: str | None = None,
    ) -> Outcome:
        return await self._writer.write_async(
            self._acknowledge(execution_id, token, outcome, now, on_failure)
        )

    def _acknowledge(
        self,
        execution_id: str,
        token: str,
        outcome: Outcome,
        now: float | None,
        on_failure: str | None,
    ) -> Callable[[Any], Outcome]:
        t = self._now(now)
        event = outcome_event(outcome, t)
        if on_failure is not None:
            check_workflow_name(on_failure)
        return lambda c: acknowledge_tx(c, execution_id, token, event, t, on_failure)

    def cancel(self, execution_id: str, *, now: float | None = None, at_once: bool = False) -> bool:
        t = self._now(now)
        if at_once:
            return self._writer.write(lambda c: cancel_now_tx(c, execution_id, t))
        return self._writer.write(lambda c: cancel_tx(c, execution_id, t))

    # -- steps ------------------------------------------------------------------------------

    def save_step(
        self, execution_id: str, token: str, key: str, step: StepWrite, *, now: float | None = None
    ) -> bool:
        return self._writer.write(self._save_step(execution_id, token, key, step, now))

    async def save_step_async(
        self, execution_id: str, token: str, key: str, step: StepWrite, *, now: float | None = None
    ) -> bool:
        return await self._writer.write_async(self._save_step(execution_id, token, key, step, now))

    def _save_step(
        self, execution_id: str, token: str, key: str, step: StepWrite, now: float | None
    ) -> Callable[[Any], bool]:
        if step.kind == "run" and step.value is not None:
            codec.check_size(step.value, f"step {key!r} value")  # the SDK checks it before sending
        t = self._now(now)
        if step.wake_at is not None:
            step = replace(step, wake_at=check_time(step.wake_at, "wake_at"))
        error = step_error(step.value, step.status)  # decoded here, outside the transaction
        return lambda c: save_step_tx(c, execution_id, token, key, step, t, error)

    def _suspend(
        self, execution_id: str, token: str, key: str, step: StepWrite, outcome: Outcome
    ) -> Callable[[Any], Outcome]:
        if step.kind == "run" and step.value is not None:
            codec.check_size(step.value, f"step {key!r} value")
        t = self._now(None)
        if step.wake_at is not None:
            step = replace(step, wake_at=check_time(step.wake_at, "wake_at"))
        error = step_error(step.value, "waiting")
        suspended = outcome_event(outcome, t)
        return lambda c: suspend_tx(c, execution_id, token, key, step, t, error, suspended)

    def delivery_state(
        self, execution_id: str, token: str, *, now: float | None = None
    ) -> tuple[Record, list[StepRecord]]:
        t = self._now(now)

        def read(c: Any) -> tuple[Record, list[StepRecord]]:
            row = c.execute(
                f"SELECT {FULL}, lease_token, lease_expires_at FROM executions "
                "WHERE execution_id=?",
                (execution_id,),
            ).fetchone()
            if row is None:
                raise not_found(execution_id)
            record = row_to_record(row)
            if not record.terminal and (row[-2] != token or row[-1] is None or row[-1] <= t):
                raise LeaseLost("LEASE_LOST", f"this delivery of {execution_id!r} has no lease")
            steps = c.execute(
                f"SELECT {STEP_COLUMNS} FROM steps WHERE execution_id=? ORDER BY first_seq",
                (execution_id,),
            ).fetchall()
            return record, [StepRecord(*r) for r in steps]

        return self._core.snapshot(read)
