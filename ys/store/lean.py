"""The lean write paths of the execution client, which both adapters build alike
from the transactions they prepare: a claim on the event loop, and the writes a worker
channel sends whose answer comes by callback on the writer's thread (`Then`). Each adapter's
client inherits them and supplies `_writer` (with `submit` and `write_async`), `_claim`,
`_save_step`, `_suspend` and `_acknowledge`, each of which checks its request and returns the transaction
that does it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ys.errors import InvalidArgument
from ys.store.base import Claimed, Then
from ys.values import Outcome, StepWrite


class LeanWrites:
    """`claim_due_async`, `save_step_then`, `suspend_then` and `acknowledge_then` (their
    contracts: ys.store.protocols.ExecutionClient)."""

    _writer: Any

    def _claim(
        self,
        now: float | None,
        limit: int,
        lease_seconds: float | None,
    ) -> Callable[[Any], Claimed]:
        raise NotImplementedError

    def _save_step(
        self, execution_id: str, token: str, key: str, step: StepWrite, now: float | None
    ) -> Callable[[Any], bool]:
        raise NotImplementedError

    def _suspend(
        self, execution_id: str, token: str, key: str, step: StepWrite, outcome: Outcome
    ) -> Callable[[Any], Outcome]:
        raise NotImplementedError

    def _acknowledge(
        self,
        execution_id: str,
        token: str,
        outcome: Outcome,
        now: float | None,
        on_failure: str | None,
    ) -> Callable[[Any], Outcome]:
        raise NotImplementedError

    async def claim_due_async(
        self,
        now: float | None = None,
        limit: int = 10,
        lease_seconds: float | None = None,
    ) -> Claimed:
        result: Claimed = await self._writer.write_async(self._claim(now, limit, lease_seconds))
        return result

    def save_step_then(
        self, then: Then, execution_id: str, token: str, key: str, step: StepWrite
    ) -> None:
        self._writer.submit(self._save_step(execution_id, token, key, step, None), then)

    def suspend_then(
        self,
        then: Then,
        execution_id: str,
        token: str,
        key: str,
        step: StepWrite,
        *,
        warnings: tuple[str, ...] | None = None,
    ) -> None:
        if step.status != "waiting":
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"a suspension saves a waiting step, not {step.status!r}"
            )
        tx = self._suspend(execution_id, token, key, step, Outcome("suspended", warnings=warnings))
        self._writer.submit(tx, then)

    def acknowledge_then(
        self,
        then: Then,
        execution_id: str,
        token: str,
        outcome: Outcome,
        *,
        on_failure: str | None = None,
    ) -> None:
        tx = self._acknowledge(execution_id, token, outcome, None, on_failure)
        self._writer.submit(tx, then)
