"""Cancelling running deliveries: the dispatcher's half of `ys cancel`.

The workflow sees a cancellation at its next step (WorkflowCancelledError) and may clean up.
A worker that does not reach a step within the grace period (`cancel_grace_seconds`, 10 s)
is killed with its process group, and the execution ends `cancelled`, recorded like any
outcome (an event applied in the store, fenced by the delivery's lease token). The daemon sees
a step when it is saved, so each step saved after the request starts the period again: clean-up
steps that each take less than it run to their end. A delivery that ends without an outcome
while a cancellation is pending ends it the same way.
"""

from __future__ import annotations

import asyncio
import logging

from ys.daemon.hub import Hub
from ys.daemon.launcher import kill_group
from ys.daemon.running import Running
from ys.daemon.tasks import Background
from ys.errors import LeaseLost
from ys.store.protocols import Outcome, Store

log = logging.getLogger("ys.dispatcher")


class Cancels:
    """The cancellations of the deliveries in `running` (the dispatcher's)."""

    def __init__(
        self,
        store: Store,
        hub: Hub,
        running: dict[str, Running],
        grace: float,
        background: Background,
    ) -> None:
        self.store = store
        self.hub = hub
        self.running = running
        self.grace = grace  # a cancelled worker's time to reach a step
        self.background = background

    async def pending(self, execution_id: str) -> bool:
        record = await self.hub.call(self.store.get, execution_id)
        return record is not None and record.cancel_requested and not record.terminal

    async def end(self, r: Running, why: str) -> None:
        """Record the outcome `cancelled` with this delivery's token (fenced like any outcome)."""
        d = r.delivery
        try:
            await self.hub.call(
                self.store.acknowledge, d.execution_id, d.token, Outcome("cancelled")
            )
        except LeaseLost:
            return  # a newer delivery owns it, and ends it as cancelled in turn
        r.acknowledged = True
        r.result = "cancelled"
        log.info("%s cancelled: %s", d.execution_id, why)

    def requested(self) -> None:
        """A cancellation was requested, of one execution and its attached children: each
        running delivery it reached gets the grace period to reach a step."""
        self.background.spawn(self._notice())

    async def _notice(self) -> None:
        for r in list(self.running.values()):
            if r.cancel_noticed or r.delivery.cancel_requested or r.acknowledged:
                continue  # its grace period already runs
            if await self.pending(r.delivery.execution_id):
                r.cancel_noticed = True
                if r.proc is not None:
                    self.start_grace(r)  # else the dispatcher starts it with the worker

    def stepped(self, execution_id: str, token: str) -> None:
        """The delivery saved a step: a grace period that runs starts again."""
        r = self.running.get(execution_id)
        if r is not None and r.delivery.token == token and r.grace is not None:
            r.grace.cancel()
            r.grace = None
            self.start_grace(r)

    def start_grace(self, r: Running) -> None:
        if r.grace is None:
            r.grace = asyncio.create_task(self._kill_after_grace(r))

    async def _kill_after_grace(self, r: Running) -> None:
        await asyncio.sleep(self.grace)
        if r.proc is not None and r.proc.returncode is None and not r.acknowledged:
            log.warning(
                "%s: cancelled, and its worker did not reach a step within %.0f s; killing it",
                r.delivery.execution_id,
                self.grace,
            )
            r.cancel_killed = True
            kill_group(r.proc)
