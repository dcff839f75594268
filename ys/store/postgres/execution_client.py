"""RFC 001's execution client on PostgreSQL (`protocols.ExecutionClient`): the same checks
as the SQLite client before the transaction, the bodies of `postgres.executions` inside it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ys import codec
from ys.contract import (
    MAX_PARAMS_BYTES,
    check_execution_id,
    check_tags,
    check_time,
    check_workflow_name,
)
from ys.errors import InvalidArgument
from ys.store import sql_sched
from ys.store.base import Admission, ConcurrencyLimit, Delivery, StepRecord
from ys.store.lean import LeanWrites
from ys.store.postgres import executions as ex
from ys.store.postgres import limits
from ys.store.postgres.core import Core
from ys.store.postgres.reads import steps
from ys.store.postgres.shared import encode_event_value, outcome_event, step_error
from ys.store.postgres.starts import cancel_tx
from ys.store.postgres.writer import Writer
from ys.store.records import Record
from ys.store.sql_sched import pg

HEAL_EVERY = 1.0  # seconds: how often claims look for waiters of free slots (concurrency.heal)


class PgExecutions(LeanWrites):
    """The execution client of one PostgresStore."""

    _writer: Writer

    def __init__(self, core: Core) -> None:
        self._core = core
        self._writer = core.writer
        self._clock = core.clock
        self._healed_at = float("-inf")  # the last claim that healed slot waiters

    def _now(self, now: float | None) -> float:
        return self._clock() if now is None else now

    # -- admission --------------------------------------------------------------------------

    def admit(
        self,
        workflow: str,
        params: Any = None,
        *,
        context: dict[str, Any] | None = None,
        execution_id: str | None = None,
        if_exists: str = "fail",
        parent: dict[str, Any] | None = None,
        now: float | None = None,
        tags: dict[str, str] | None = None,
    ) -> Admission:
        return self._writer.write(
            self._admission(workflow, params, context, execution_id, if_exists, parent, now, tags)
        )

    async def admit_async(
        self,
        workflow: str,
        params: Any = None,
        *,
        context: dict[str, Any] | None = None,
        execution_id: str | None = None,
        if_exists: str = "fail",
        parent: dict[str, Any] | None = None,
        now: float | None = None,
        tags: dict[str, str] | None = None,
        lease_seconds: float | None = None,
    ) -> Admission:
        fn = self._admission(workflow, params, context, execution_id, if_exists, parent, now, tags)
        if lease_seconds is None:
            return await self._writer.write_async(fn)
        t, lease = self._now(now), lease_seconds
        holder, pid = self._core.holder, self._core.pid

        def tx(c: Any) -> Admission:
            admission = fn(c)
            if not admission.started:
                return admission
            if c.execute(pg(sql_sched.IS_PAUSED), (workflow,)).fetchone():  # waits for resume
                return admission
            delivery = ex.claim_new(c, admission.execution_id, t, lease, holder, pid)
            return replace(admission, delivery=delivery)

        return await self._writer.write_async(tx)

    def _admission(
        self,
        workflow: str,
        params: Any,
        context: dict[str, Any] | None,
        execution_id: str | None,
        if_exists: str,
        parent: dict[str, Any] | None,
        now: float | None,
        tags: dict[str, str] | None = None,
    ) -> Callable[[Any], Admission]:
        """Checked and encoded before the transaction, as the SQLite client does."""
        check_workflow_name(workflow)
        if execution_id is not None:
            check_execution_id(execution_id)
        if if_exists not in ("fail", "use-existing"):
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"if_exists must be 'fail' or 'use-existing', not {if_exists!r}"
            )
        params_json = encode_event_value({} if params is None else params, "params")
        if len(params_json.encode("utf-8")) > MAX_PARAMS_BYTES:
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                f"params are {len(params_json.encode())} bytes encoded; the limit is 2 MiB",
            )
        context_json = encode_event_value(context, "context") if context else "{}"
        tag_map = check_tags(tags)
        at = check_time(self._now(now), "the admission time")
        return lambda c: ex.admit_tx(
            c, workflow, params_json, context_json, execution_id, if_exists, parent, at, tag_map
        )

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
        due = t if at is None else check_time(at, "the wake time")
        return self._writer.write(lambda c: ex.request_wake_tx(c, execution_id, due, t, reason))

    def wake_workflow(self, workflow: str, *, now: float | None = None) -> int:
        t = self._now(now)
        return self._writer.write(lambda c: ex.wake_workflow_tx(c, workflow, t))

    def claim_due(
        self,
        now: float | None = None,
        limit: int = 10,
        lease_seconds: float | None = None,
        limits: Mapping[str, ConcurrencyLimit] | None = None,
    ) -> list[Delivery]:
        return self._writer.write(self._claim(now, limit, lease_seconds, limits))

    def _claim(
        self,
        now: float | None,
        limit: int,
        lease_seconds: float | None,
        limits: Mapping[str, ConcurrencyLimit] | None,
    ) -> Callable[[Any], list[Delivery]]:
        t = self._now(now)
        lease = self._core.lease_seconds if lease_seconds is None else lease_seconds
        holder, pid = self._core.holder, self._core.pid
        heal = bool(limits) and not 0 <= t - self._healed_at < HEAL_EVERY
        if heal:
            self._healed_at = t
        return lambda c: ex.claim_due_tx(c, t, limit, lease, holder, pid, limits, heal)

    def release_expired(self, now: float | None = None) -> list[str]:
        t = self._now(now)
        return self._writer.write(lambda c: ex.release_expired_tx(c, t, limit=None))

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
        return lambda c: ex.renew_tx(c, execution_id, token, t, expires)

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
        data: dict[str, Any] = {"reason": reason, "retry_at": retry_at or t}
        if detail:
            data["detail"] = detail[-2000:]
        if on_failure is not None:
            check_workflow_name(on_failure)
        return self._writer.write(
            lambda c: limits.release_counted_tx(
                c, execution_id, token, t, data, max_attempts, on_failure
            )
        )

    def timed_out(self, now: float | None = None, limit: int = 100) -> list[tuple[str, str]]:
        t = self._now(now)
        return self._core.read(lambda c: limits.timed_out(c, t, limit))

    def time_out(
        self, execution_id: str, *, now: float | None = None, on_failure: str | None = None
    ) -> bool:
        t = self._now(now)
        if on_failure is not None:
            check_workflow_name(on_failure)
        return self._writer.write(lambda c: limits.time_out_tx(c, execution_id, t, on_failure))

    def acknowledge(
        self,
        execution_id: str,
        token: str,
        outcome: dict[str, Any],
        *,
        now: float | None = None,
        on_failure: str | None = None,
    ) -> dict[str, Any]:
        """Record the outcome; a failure admits the `on_failure` workflow in the same
        transaction (`<ID>.on-failure`, ys.store.postgres.handlers)."""
        return self._writer.write(self._acknowledge(execution_id, token, outcome, now, on_failure))

    async def acknowledge_async(
        self,
        execution_id: str,
        token: str,
        outcome: dict[str, Any],
        *,
        now: float | None = None,
        on_failure: str | None = None,
    ) -> dict[str, Any]:
        return await self._writer.write_async(
            self._acknowledge(execution_id, token, outcome, now, on_failure)
        )

    def _acknowledge(
        self,
        execution_id: str,
        token: str,
        outcome: dict[str, Any],
        now: float | None,
        on_failure: str | None,
    ) -> Callable[[Any], dict[str, Any]]:
        t = self._now(now)
        event = outcome_event(outcome, t)
        if on_failure is not None:
            check_workflow_name(on_failure)
        return lambda c: ex.acknowledge_tx(c, execution_id, token, event, t, on_failure)

    def cancel(self, execution_id: str, *, now: float | None = None, at_once: bool = False) -> bool:
        t = self._now(now)
        if at_once:
            return self._writer.write(lambda c: limits.cancel_now_tx(c, execution_id, t))
        return self._writer.write(lambda c: cancel_tx(c, execution_id, t))

    # -- steps ------------------------------------------------------------------------------

    def save_step(
        self,
        execution_id: str,
        token: str,
        key: str,
        *,
        kind: str,
        status: str,
        value: str | None,
        attempts: int = 1,
        wake_at: float | None = None,
        now: float | None = None,
    ) -> bool:
        return self._writer.write(
            self._save_step(execution_id, token, key, kind, status, value, attempts, wake_at, now)
        )

    async def save_step_async(
        self,
        execution_id: str,
        token: str,
        key: str,
        *,
        kind: str,
        status: str,
        value: str | None,
        attempts: int = 1,
        wake_at: float | None = None,
        now: float | None = None,
    ) -> bool:
        return await self._writer.write_async(
            self._save_step(execution_id, token, key, kind, status, value, attempts, wake_at, now)
        )

    def _save_step(
        self,
        execution_id: str,
        token: str,
        key: str,
        kind: str,
        status: str,
        value: str | None,
        attempts: int,
        wake_at: float | None,
        now: float | None,
    ) -> Callable[[Any], bool]:
        if kind == "run" and value is not None:
            codec.check_size(value, f"step {key!r} value")  # the SDK checks it before sending
        t = self._now(now)
        if wake_at is not None:
            check_time(wake_at, "the step's wake time")
        error = step_error(value, status)  # decoded here, outside the transaction
        return lambda c: ex.save_step_tx(
            c, execution_id, token, key, kind, status, value, attempts, wake_at, t, error
        )

    def delivery_state(
        self, execution_id: str, token: str, *, now: float | None = None
    ) -> tuple[Record, list[StepRecord]]:
        t = self._now(now)

        def read(c: Any) -> tuple[Record, list[StepRecord]]:
            row = c.execute(
                f"SELECT {ex.FULL}, lease_token, lease_expires_at FROM executions "
                "WHERE execution_id=%s",
                (execution_id,),
            ).fetchone()
            if row is None:
                raise ex.not_found(execution_id)
            record = ex.row_to_record(row)
            if not record.terminal and (row[-2] != token or row[-1] is None or row[-1] <= t):
                raise ex.lease_lost(execution_id)
            return record, steps(c, execution_id)

        return self._core.snapshot(read)
