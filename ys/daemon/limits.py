"""Hard timeouts and force-kill: the dispatcher's half (docs/design.md, "Workflow options").

The store ends an execution past its deadline (`time_out`) or cancelled at once (`cancel(...,
at_once=True)`) in one transaction that drops its lease, so the worker's later writes are
refused; the daemon running the worker then kills its process group. A daemon learns it
three ways: its own deadline watch of each delivery it runs (`watch_delivery`), its sweep of
every live execution past its deadline (`expire_due`, which also fails suspended and
admitted ones without a delivery), and, on a database many daemons share, another daemon's
change to an execution it runs (`ended_elsewhere`).

A step attempt with a timeout is announced by its worker before the body runs
(`step_deadline`); past the limit the dispatcher kills the worker and records the attempt
itself: failed with `StepTimeout`, or waiting for its retry when the step's policy allows one.
The delivery then ends without an outcome (not counted toward `max_attempts`) and the next
one sees the recorded attempt. The limit is stored with the lease (`store.step_deadline`), so
if this daemon dies first, the sweep of its lease records the attempt instead.

A worker killed here for an execution that ended without it keeps its concurrency slot until
it has exited: the dispatcher then frees it (`store.free_slot`; docs/design.md, "Workflow
options").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ys import codec
from ys.daemon.hub import Hub
from ys.daemon.launcher import kill_group
from ys.daemon.outage import Outage
from ys.daemon.running import Running
from ys.daemon.tasks import Background
from ys.errors import DaemonUnavailable, LeaseLost, YsError
from ys.store.protocols import Store
from ys.values import StepWrite

log = logging.getLogger("ys.dispatcher")
SWEEP_LIMIT = 100  # past-deadline executions failed per sweep (the next sweep goes on at once)


class Limits:
    """The timeouts of the deliveries in `running` (the dispatcher's), and their force-kill."""

    def __init__(
        self,
        store: Store,
        hub: Hub,
        running: dict[str, Running],
        handler_for: Callable[[str], str | None],
        background: Background,
    ) -> None:
        self.store = store
        self.hub = hub
        self.running = running
        self.handler_for = handler_for  # the workflow a failure of a workflow admits
        self.background = background
        # A lost database fails every timing out until it is back: said once, not a line per
        # try or per execution (docs/design.md, "On PostgreSQL")
        self.outage = Outage(log, "timing out", "timing out works again")

    # -- workflow timeouts ------------------------------------------------------------------

    async def expire_due(self) -> int | None:
        """Fail every live execution past its deadline, each in its own transaction (which
        checks the deadline again), and kill a worker of one that runs here: how many were
        past it. None: the database is away (said once through `outage`); the rest stay past
        their deadline for the next sweep."""
        try:
            due = await self.hub.call(self.store.timed_out, self.store.clock(), SWEEP_LIMIT)
            for execution_id, workflow in due:
                await self._time_out(execution_id, workflow)
        except DaemonUnavailable as exc:
            self.outage.lost(exc)
            return None
        self.outage.back()
        return len(due)

    async def _time_out(self, execution_id: str, workflow: str) -> None:
        try:
            ended = await self.hub.call(
                self.store.time_out, execution_id, on_failure=self.handler_for(workflow)
            )
        except DaemonUnavailable:
            raise  # not this execution's fault: tried again once the database answers
        except YsError as exc:
            log.error("%s: could not time out: %s", execution_id, exc)
            return
        if ended:
            log.warning("%s: past its workflow's timeout; it failed", execution_id)
            self.hub.notify(execution_id, may_end=True)
            r = self.running.get(execution_id)
            if r is not None:
                self.end_here(r, "timed out")
        else:  # another daemon's sweep came first (its worker is killed all the same)
            self.ended_elsewhere(execution_id)

    async def watch_deadline(self, r: Running) -> None:
        """At the delivery's deadline: fail the execution (if no daemon did yet) and kill its
        worker. The daemon holding the lease does this whichever daemon's sweep came first."""
        deadline = r.delivery.deadline_at
        if deadline is None:
            return
        await asyncio.sleep(max(0.0, deadline - self.store.clock()))
        while self.store.clock() < deadline:  # the loop's clock may run a little ahead
            await asyncio.sleep(0.01)
        while True:  # until it is done, or the delivery ends (this task is cancelled then)
            try:
                await self._time_out(r.delivery.execution_id, r.delivery.workflow)
            except DaemonUnavailable as exc:
                await asyncio.sleep(self.outage.lost(exc))
                continue
            self.outage.back()
            return

    def end_here(self, r: Running, why: str) -> None:
        """The execution ended without its worker (timed out, cancelled at once): kill the
        worker; the delivery records nothing more."""
        if r.acknowledged and not r.ended:
            return  # it recorded its own outcome first
        if not r.ended:
            log.warning("%s %s; killing its worker", r.delivery.execution_id, why)
        r.ended = why
        r.acknowledged = True
        r.result = r.result or ("cancelled" if "cancel" in why else "failed")
        if r.proc is not None and r.proc.returncode is None:
            kill_group(r.proc)

    def ended_elsewhere(self, execution_id: str) -> None:
        """An execution may have ended without its worker (another daemon timed it out or
        cancelled it at once, or this daemon's API did): kill the worker if it runs here."""
        r = self.running.get(execution_id)
        if r is None or r.acknowledged:
            return
        if r.checking_end:  # one look at a time (on PostgreSQL each of its steps notifies
            r.check_again = True  # too), and one more after it for what came meanwhile
            return
        r.checking_end = True
        self.background.spawn(self._check_ended(r))

    async def _check_ended(self, r: Running) -> None:
        try:
            while True:
                r.check_again = False
                record = await self.hub.call(self.store.get, r.delivery.execution_id)
                if record is not None and record.terminal and not r.acknowledged:
                    self.end_here(r, f"ended {record.status} without its worker")
                if not r.check_again or r.acknowledged:
                    return
        finally:
            r.checking_end = False

    # -- step timeouts ----------------------------------------------------------------------

    def step_deadline(
        self,
        execution_id: str,
        token: str,
        key: str,
        timeout: float,
        attempts: int,
        retry_delay: float | None,
    ) -> None:
        """A worker's attempt of step `key` may run `timeout` seconds from now."""
        r = self.running.get(execution_id)
        if r is None or r.delivery.token != token or r.acknowledged:
            return
        if r.step_timer is not None:
            r.step_timer.cancel()
        r.step_key = key
        r.step_timer = asyncio.get_running_loop().create_task(
            self._step_timeout(r, key, timeout, attempts, retry_delay)
        )

    def use_step_key(self, execution_id: str, token: str, key: str) -> None:
        """A shell workflow's `ys step` takes `key` in this delivery: each `ys step` is a process
        of its own, so the daemon keeps the keys one delivery used and refuses a second use
        (DUPLICATE_STEP_KEY, as step.run raises in a Python workflow). A later delivery starts
        afresh: there every key replays."""
        r = self.running.get(execution_id)
        if r is None or r.delivery.token != token:
            return
        if key in r.step_keys:
            raise YsError("DUPLICATE_STEP_KEY", f"step key {key!r} is used twice in one run")
        r.step_keys.add(key)

    def step_ending(self, execution_id: str, token: str, key: str) -> None:
        """The worker saves step `key`: its attempt is over, unless the dispatcher already
        killed it for its timeout (then the save is refused: LEASE_LOST)."""
        r = self.running.get(execution_id)
        if r is None or r.delivery.token != token or r.step_key != key:
            return
        if r.step_timed_out:
            raise LeaseLost(
                "LEASE_LOST", f"step {key!r} of {execution_id} was killed for its timeout"
            )
        if r.step_timer is not None:
            r.step_timer.cancel()
        r.step_timer, r.step_key = None, ""

    async def _step_timeout(
        self, r: Running, key: str, timeout: float, attempts: int, retry_delay: float | None
    ) -> None:
        await asyncio.sleep(timeout)
        if r.acknowledged or r.proc is None or r.proc.returncode is not None:
            return
        r.step_timed_out = True
        d = r.delivery
        log.warning(
            "%s: step %r ran past its timeout of %g s; killing its worker",
            d.execution_id,
            key,
            timeout,
        )
        kill_group(r.proc)
        error = codec.ErrorValue(
            "StepTimeout",
            f"step {key!r} ran past its timeout of {timeout:g} s; its worker was killed",
            "STEP_TIMEOUT",
        )
        now = self.store.clock()
        wake = None if retry_delay is None else now + retry_delay
        r.step_retry_at = wake
        try:
            await self.hub.call(
                self.store.save_step,
                d.execution_id,
                d.token,
                key,
                StepWrite(
                    "run",
                    "failed" if wake is None else "waiting",
                    codec.dumps(error),
                    attempts=attempts,
                    wake_at=wake,
                ),
            )
        except YsError as exc:  # the lease is gone (timed out, cancelled): nothing to record
            log.warning("%s: step %r's timeout not recorded: %s", d.execution_id, key, exc)
        self.hub.notify(d.execution_id)
