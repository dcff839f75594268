"""What a delivery's worker asks of the daemon, each written once: save a step, suspend, report
the outcome, announce a step's deadline, renew the lease, start a child, begin, settle or wait
on an effect, wait on a value. Each owns its checks, its store call, the dispatcher's
bookkeeping, its metrics and whom it tells. The worker's HTTP routes (`ys step` in a shell
workflow) and the worker channel (a Python workflow's worker) are thin adapters over these
(docs/design.md, "Deliveries"), as the operator's routes and the dashboard's buttons are over
ys.daemon.operations.

The step path is lean: a save or an outcome is handed to the store's writer with a callback,
`then(result, error)`, called on the writer's thread right after the commit that made it
durable. The channel answers its worker from there, with no hand-off back to the loop; an
HTTP route awaits the same call (`_awaited`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ys.contract import request_params
from ys.crashpoints import crash_point
from ys.daemon import operations
from ys.errors import InvalidArgument
from ys.values import StepWrite

if TYPE_CHECKING:
    from ys.daemon.api_requests import (
        EffectBegin,
        EffectSettle,
        EffectWait,
        Start,
        StepDeadline,
        ValueWait,
    )
    from ys.daemon.parts import DaemonParts
    from ys.store.protocols import EffectState, Outcome, Record, ValueFound

Then = Callable[[Any, BaseException | None], None]


class Deliveries:
    """The daemon's answers to delivery workers, whichever way they ask."""

    def __init__(self, d: DaemonParts) -> None:
        self.d = d

    # -- the lean path: answered on the writer's thread -------------------------------------

    def save_step(
        self, eid: str, token: str, key: str, req: StepWrite, then: Then, point: str = ""
    ) -> None:
        """Record a step; `then(cancel_requested, error)` once committed. A step whose
        attempt the dispatcher killed for its timeout is recorded by the dispatcher: a save
        that comes after the kill is refused (LEASE_LOST)."""
        disp, hub, loop = self.d.dispatcher, self.d.hub, asyncio.get_running_loop()
        disp.step_ending(eid, token, key)

        def saved(cancel: Any, error: BaseException | None) -> None:  # the writer's thread
            if error is None:
                if point:
                    crash_point(point)  # committed, not answered
                if hub.watched(eid):  # a long poll waits on it (`ys history --follow`, the UI)
                    loop.call_soon_threadsafe(hub.notify, eid)
                cancel = bool(cancel)
            then(cancel, error)

        self.d.store.save_step_then(saved, eid, token, key, req)
        disp.step_recorded(eid, token, req.kind, req.status)

    def suspend(
        self,
        eid: str,
        token: str,
        key: str,
        req: StepWrite,
        warnings: tuple[str, ...] | None,
        then: Then,
        point: str = "",
    ) -> None:
        """A waiting step (a sleep, a retry's delay, ...) and the `suspended` outcome that
        follows it, committed in one transaction; `warnings` (the delivery's) are checked with
        the outcome, by the store."""
        disp = self.d.dispatcher
        disp.step_ending(eid, token, key)
        disp.flush_output(eid, token)  # the worker flushed its output before it asked
        first = disp.delivering(eid, token)
        self.d.store.suspend_then(
            self._ended(eid, token, first, None, then, point),
            eid,
            token,
            key,
            replace(req, status="waiting"),
            warnings=warnings,
        )
        disp.step_saved(eid, token, req.kind)

    def acknowledge(
        self,
        eid: str,
        token: str,
        outcome: Outcome,
        workflow: str | None,
        then: Then,
        point: str = "outcome.after_commit",
    ) -> None:
        """Record the delivery's outcome; a failure admits the workflow's failure handler in
        the same transaction. Its log is whole before the outcome: whoever sees the outcome
        sees all it printed."""
        disp = self.d.dispatcher
        disp.flush_output(eid, token)
        on_failure = self._handler(outcome, workflow)
        first = disp.delivering(eid, token)
        self.d.store.acknowledge_then(
            self._ended(eid, token, first, on_failure, then, point),
            eid,
            token,
            outcome,
            on_failure=on_failure,
        )

    async def acknowledge_in_pool(
        self, eid: str, token: str, outcome: Outcome, workflow: str | None
    ) -> Outcome:
        """`acknowledge` for an outcome too big to encode on the loop: encoded and written in
        the thread pool."""
        disp = self.d.dispatcher
        disp.flush_output(eid, token)
        on_failure = self._handler(outcome, workflow)
        first = disp.delivering(eid, token)
        result: Outcome = await self.d.hub.call(
            self.d.store.acknowledge, eid, token, outcome, on_failure=on_failure
        )
        crash_point("outcome.after_commit")
        self._acknowledged(eid, token, result, first, on_failure)
        return result

    def _handler(self, outcome: Outcome, workflow: str | None) -> str | None:
        if outcome.status != "failed" or workflow is None:
            return None
        return self.d.handler_for(workflow)

    def _ended(
        self,
        eid: str,
        token: str,
        first: bool,
        on_failure: str | None,
        then: Then,
        point: str,
    ) -> Then:
        loop = asyncio.get_running_loop()

        def ended(result: Outcome | None, error: BaseException | None) -> None:  # writer's thread
            if result is not None:  # committed (None with the error that refused it)
                if point:
                    crash_point(point)  # committed (a failure with its handler), not answered
                # Before the answer: the dispatcher knows of the outcome before the worker exits.
                loop.call_soon_threadsafe(self._acknowledged, eid, token, result, first, on_failure)
            then(result, error)

        return ended

    def _acknowledged(
        self, eid: str, token: str, result: Outcome, first: bool, on_failure: str | None
    ) -> None:
        status = result.status
        if on_failure is not None and first and status == "failed":
            self.d.metrics.admissions.labels("on_failure").inc()
        mine = self.d.dispatcher.acknowledged(eid, token, status)
        self.d.hub.notify(eid, may_end=True)
        if not mine:  # else the end of its worker pokes the dispatcher
            self.d.dispatcher.poke()

    # -- the same, awaited (the HTTP routes) -------------------------------------------------

    async def save_step_async(self, eid: str, token: str, key: str, req: StepWrite) -> bool:
        cancel: bool = await _awaited(lambda then: self.save_step(eid, token, key, req, then))
        return cancel

    async def acknowledge_async(
        self, eid: str, token: str, outcome: Outcome, *, big: bool = False
    ) -> Outcome:
        """`acknowledge` for a caller that does not know the delivery's workflow (`ys step`
        reports an outcome over HTTP): read from the record when a failure needs it."""
        workflow = None
        if outcome.status == "failed":
            record = await self.d.hub.call(self.d.store.get, eid)
            workflow = record.workflow if record is not None else None
        if big:
            return await self.acknowledge_in_pool(eid, token, outcome, workflow)
        result: Outcome = await _awaited(
            lambda then: self.acknowledge(eid, token, outcome, workflow, then)
        )
        return result

    # -- the rarer requests, answered from the loop ------------------------------------------

    async def deadline(self, eid: str, token: str, key: str, req: StepDeadline) -> None:
        """A worker announces the limit of one step attempt before its body runs: past it the
        dispatcher kills the worker and records the attempt. Fenced: the live lease's. Stored
        with the lease it renews: if this daemon dies, the sweep of the lease records it."""
        await self.d.hub.call(
            self.d.store.step_deadline,
            eid,
            token,
            key,
            timeout=req.timeout,
            attempts=req.attempts,
            retry_delay=req.retry_delay,
        )
        self.d.dispatcher.step_deadline(eid, token, key, req.timeout, req.attempts, req.retry_delay)

    async def renew(self, eid: str, token: str) -> float:
        """The lease's new end."""
        disp = self.d.dispatcher
        expires = await self.d.store.renew_async(eid, token, lease_seconds=disp.lease_seconds)
        disp.renewed(eid, token, expires)
        return expires

    async def start(self, caller: str, key: str, req: Start) -> str:
        """A child start: idempotent by (caller, step key), not fenced. The worker sends
        params_json, encoded once on its side; another caller may send params as an object,
        encoded once here. The store checks the text."""
        params_json = req.params_json
        if params_json is None:
            params_json = request_params(req.params)
        await operations.known_workflow(self.d, req.workflow)  # refused as `ys trigger` is
        target: str = await self.d.hub.call(
            self.d.store.start, caller, key, req.workflow, params_json, detached=req.detached
        )
        self.d.hub.notify(target)
        self.d.dispatcher.poke()
        return target

    async def get(self, execution_id: str) -> Record:
        return await operations.load(self.d, execution_id)

    async def effect_begin(self, effect_id: str, req: EffectBegin) -> EffectState:
        state: EffectState = await self.d.hub.call(
            self.d.store.effect_begin,
            req.operation,
            effect_id,
            req.input,
            req.execution_id,
            req.step_key,
        )
        return state

    async def effect_settle(self, effect_id: str, req: EffectSettle) -> EffectState:
        try:
            state: EffectState = await self.d.hub.call(
                self.d.store.effect_settle, req.operation, effect_id, req.result
            )
        except ValueError as exc:
            raise InvalidArgument("INVALID_ARGUMENT", f"result is not canonical: {exc}") from None
        self.d.dispatcher.poke()  # settlement wakes every waiter
        return state

    async def effect_wait(self, effect_id: str, req: EffectWait) -> float:
        """The waiter's wake: now if the effect is settled."""
        first: float = await self.d.hub.call(
            self.d.store.effect_wait, effect_id, req.execution_id, req.step_key, req.wake_at
        )
        self.d.dispatcher.poke()
        return first

    async def value_wait(self, key: str, req: ValueWait) -> ValueFound | None:
        found: ValueFound | None = await self.d.hub.call(
            self.d.store.value_wait, key, req.execution_id, req.step_key, req.seen, req.timeout_at
        )
        return found


async def _awaited(call: Callable[[Then], None]) -> Any:
    """A call answered by `then` on the writer's thread, as an awaitable on this loop."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if fut.done():
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)

    def then(result: Any, error: BaseException | None) -> None:  # the writer's thread
        loop.call_soon_threadsafe(settle, result, error)

    call(then)
    return await fut
