"""The dispatcher: claim due executions, run each delivery as a process under a lease,
acknowledge what the worker reported or release what it did not.

Workers renew their own lease (a stopped or wedged worker cannot), and the dispatcher kills a
delivery's process group once its lease is lost, so no execution runs in two places at once.
A delivery ends when its script exits: its process group is killed then, so nothing it left
in the background outlives it. A cancellation the worker does not honour within the grace
period (YS_CANCEL_GRACE_SECONDS, 10 s: it did not reach a step) kills it and ends the
execution cancelled, and so does a delivery that ends without an outcome while a cancellation
is pending; a later delivery of such an execution runs no workflow code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ys import tracing
from ys.daemon.cancelling import Cancels
from ys.daemon.capture import (
    DEFAULT_LOG_MAX_BYTES,
    MIN_LOG_MAX_BYTES,
    CappedLog,
    LastLine,
    Pipe,
    drain,
)
from ys.daemon.cgroups import RLIMIT_AS, Choice, MemoryCgroups
from ys.daemon.hub import Hub
from ys.daemon.launcher import Launcher, kill_group
from ys.daemon.limits import SWEEP_LIMIT, Limits
from ys.daemon.logtails import LogTails
from ys.daemon.orphans import forget_worker, record_worker
from ys.daemon.outage import DOWN_RETRY_MAX, DOWN_RETRY_MIN, Outage
from ys.daemon.registry import Registry, Workflow
from ys.daemon.running import Running
from ys.daemon.tasks import Background
from ys.daemon.workerstart import WorkerStart
from ys.errors import DaemonUnavailable, LeaseLost, YsError
from ys.guard import lease_end, margin
from ys.paths import Paths
from ys.runenv import MEMORY_LIMIT_ERROR
from ys.store.protocols import Delivery, Outcome, OutcomeError, Store

if TYPE_CHECKING:
    from ys.daemon.metrics import Metrics
    from ys.daemon.tracing import Tracer

P = ParamSpec("P")
T = TypeVar("T")
log = logging.getLogger("ys.dispatcher")
LINGER = 1.0  # seconds a worker may take to exit after its outcome before a round runs anyway
MAX_IDLE = 30.0  # re-read the wall clock at least this often, so a laptop that slept catches up
PIPE_GRACE = 5.0  # after a worker exits, how long its output may still take to arrive


def _no_handler(_workflow: str) -> str | None:
    return None


@dataclass(frozen=True)
class DispatcherParts:
    """What the dispatcher works with, all given at its construction."""

    store: Store
    registry: Registry
    launcher: Launcher
    paths: Paths
    hub: Hub
    # what limits a worker's memory_max: the daemon's cgroups, else RLIMIT_AS
    memory: MemoryCgroups = field(
        default_factory=lambda: MemoryCgroups(Choice(RLIMIT_AS, "RLIMIT_AS per process"))
    )
    # the workflow a failure of a workflow admits (the daemon's handler_for)
    handler_for: Callable[[str], str | None] = _no_handler
    metrics: Metrics | None = None  # the daemon's (ys.daemon.metrics); None in tests
    tracer: Tracer | None = None  # exports traces (ys.daemon.tracing); None: tracing is off
    daemon_id: str = ""  # the daemon's ID (ys.daemon.identity), named with kept log ends
    # a Python worker's channel, served from its socket (the daemon's: ys.daemon.channel)
    open_channel: Callable[[Running, socket.socket], Any] | None = None


@dataclass(frozen=True)
class DispatcherTuning:
    concurrency: int = 4
    lease_seconds: float = 30.0
    retry_base: float = 1.0
    retry_max: float = 300.0
    cancel_grace: float = 10.0  # a cancelled worker's time to reach a step
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES


class Dispatcher:
    def __init__(self, parts: DispatcherParts, tuning: DispatcherTuning) -> None:
        self.parts = parts
        self.tuning = tuning
        self.store = parts.store
        self.registry = parts.registry
        self.paths = parts.paths
        self.hub = parts.hub
        self.memory = parts.memory  # (the API shows what limits memory_max)
        self.concurrency = tuning.concurrency
        self.lease_seconds = tuning.lease_seconds
        # the cap of each delivery log, at least the least the log capture keeps
        self.log_max_bytes = max(MIN_LOG_MAX_BYTES, tuning.log_max_bytes)
        self.running: dict[str, Running] = {}
        background = Background()
        self.cancels = Cancels(self.store, self.hub, self.running, tuning.cancel_grace, background)
        self.limits = Limits(self.store, self.hub, self.running, parts.handler_for, background)
        self.tails = LogTails(self.store, self.hub, parts.daemon_id)
        self.outage = Outage()
        self.starts = WorkerStart(
            self.store, self.registry, self.paths, self.hub, parts.tracer, self.lease_seconds
        )
        self._poke = asyncio.Event()
        self._stopping = False
        self._halted = False  # the database moved: no worker may run on (`halt`)
        self._reserved = 0  # slots reserved by admissions that claim in their transaction
        self._caught_up = False  # the last claim took everything due (it asked for more)
        self._claiming = False  # a round runs, or another follows at once (`busy`)
        self._deadline_at = 0.0  # the earliest deadline of a live execution, as last read
        self._task: asyncio.Task[None] | None = None
        # what the routes and the worker channel tell it (ys.daemon.delivering, .operations),
        # answered by the part that keeps it
        self.cancels_requested = self.cancels.requested
        self.ended_elsewhere = self.limits.ended_elsewhere
        self.step_deadline = self.limits.step_deadline
        self.use_step_key = self.limits.use_step_key
        self.step_ending = self.limits.step_ending

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.hub.call(fn, *args, **kwargs)

    def poke(self) -> None:
        """Something may have become due (an admission, a wake, a freed slot)."""
        self._poke.set()

    def busy(self) -> bool:
        """A claim round runs or is to run at once (`ys_dispatcher_busy`): false only while
        the loop waits with no poke pending."""
        return self._claiming or self._poke.is_set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="dispatcher")

    # -- the loop ---------------------------------------------------------------------------

    async def _loop(self) -> None:
        while not self._stopping:
            self._poke.clear()
            self._claiming = True
            try:
                timeout = await self._round()
            except Exception as exc:  # the database is gone (or a bug): never stop claiming
                timeout = self.outage.lost(exc)
            self._claiming = timeout == 0
            try:
                await asyncio.wait_for(self._poke.wait(), timeout)
            except TimeoutError:
                pass

    async def _round(self) -> float:
        """Time out what is past its deadline, claim what is due, and say how long to wait
        for a poke before the next round (0: at once)."""
        # Past their deadline: failed, never delivered again (ys.daemon.limits). Looked
        # for only once the earliest deadline (read before the loop last waited) is due.
        if not self.outage.down and self.store.clock() >= self._deadline_at:
            try:
                expired = await self.limits.expire_due()  # None: the database is away
                if expired is not None and expired < SWEEP_LIMIT:
                    self._deadline_at = math.inf  # until the next look says otherwise
            except YsError as exc:
                log.error("timing out failed: %s", exc)
        free = self.concurrency - len(self.running) - self._reserved
        claimed: list[Delivery] = []
        since = time.monotonic()  # no later than the claims' leases start
        if free > 0:
            claimed = await self.store.claim_due_async(self.store.clock(), free, self.lease_seconds)
            self._caught_up = len(claimed) < free
            self.outage.back()
            self._ended_by_sweep(claimed.ended)
        for d in claimed:
            self._start(d, since)
        if claimed and len(claimed) == free:
            return 0.0  # more may be due
        # At the ceiling no claim could tell whether a lost database is back: the read below
        # does (a failure goes to the loop's outage handling), so deadlines are enforced again
        # without waiting for a slot to free.
        timeout = MAX_IDLE
        # At the --concurrency ceiling nothing can be claimed, but a deadline still falls
        # due (an admitted or suspended execution past it fails without a delivery).
        full = len(self.running) >= self.concurrency
        due, deadline = await self.call(self.store.next_times)
        self.outage.back()
        self._deadline_at = math.inf if deadline is None else deadline
        nxt = deadline if full else due
        if nxt is not None:
            soonest = 0.1 if full else 0.0  # (a deadline that could not be enforced: no spin)
            timeout = min(MAX_IDLE, max(soonest, nxt - self.store.clock()) + 0.005)
        return timeout

    def _ended_by_sweep(self, ended: tuple[str, ...]) -> None:
        """Executions the claim's sweep of lost leases failed (their last attempt): a `ys
        wait` on them learns now, and a worker of one still here (its lease lost) is killed."""
        for execution_id in ended:
            self.hub.notify(execution_id, may_end=True)
            self.ended_elsewhere(execution_id)

    def _start(self, d: Delivery, since: float | None = None) -> None:
        """Run a claimed delivery, whose lease was granted no earlier than `since`
        (time.monotonic(); None: now, a moment after its claim)."""
        if self._halted:  # claimed in a round that was under way when the move was seen
            return
        self.hub.notify(d.execution_id)
        if self.parts.metrics is not None:
            self.parts.metrics.deliveries_started.labels(d.workflow).inc()
            if d.attempt > 1:
                self.parts.metrics.redeliveries.labels(d.workflow).inc()
        # A delivery whose lease expired may still be here, being killed: claim_due
        # released and re-claimed its execution. The new one waits until it is gone.
        prev = self.running.get(d.execution_id)
        now = time.monotonic()
        r = Running(
            d,
            lease_expires_at=d.lease_expires_at,
            started_at=now,
            lease_since=now if since is None else since,
        )
        self.running[d.execution_id] = r
        r.task = asyncio.create_task(self._deliver(r, prev), name=f"deliver {d.execution_id}")

    # -- deliveries claimed in their admission's transaction -----------------------------------

    def reserve(self, workflow: str) -> float | None:
        """A free slot for an execution of `workflow` about to be admitted, to claim it in its
        admission's transaction (one commit fewer before its first line runs): the lease to
        claim it with, or None when that should not be done: no slot is free, executions due
        before it are not all claimed yet, its workflow is not runnable or has a concurrency
        limit (the claim counts slots), or the daemon stops. `admitted` ends the reservation."""
        if self._stopping or not self._caught_up or workflow in self.registry.limits:
            return None
        if len(self.running) + self._reserved >= self.concurrency:
            return None
        wf = self.registry.get(workflow)
        if wf is None or wf.error is not None:
            return None
        self._reserved += 1
        return self.lease_seconds

    def admitted(self, delivery: Delivery | None) -> None:
        """End a reservation: run what its admission claimed (None: it claimed nothing)."""
        self._reserved -= 1
        if delivery is None:
            self.poke()  # the slot it held is free again
        elif self._stopping:  # too late to run: its lease is released by the next start
            log.info("%s: admitted while the daemon stops; it runs after", delivery.execution_id)
        else:
            self._start(delivery)

    # -- one delivery -----------------------------------------------------------------------

    def retry_delay(self, attempt: int) -> float:
        return min(self.tuning.retry_max, self.tuning.retry_base * (2.0 ** max(0, attempt - 1)))

    async def _deliver(self, r: Running, prev: Running | None = None) -> None:
        d = r.delivery
        try:
            if prev is not None:
                # never two processes for one execution: the old one lost its lease
                prev.lost = True
                if prev.proc is not None:
                    kill_group(prev.proc)
                if prev.task is not None:
                    await asyncio.wait([prev.task])
            if d.cancel_seen:
                why = (
                    "it was cancelled before it ever ran (waiting for a concurrency slot)"
                    if d.attempt == 1
                    else "an earlier delivery ended without honouring it"
                )
                await self.cancels.end(r, why)
                return
            wf = self.registry.get(d.workflow)
            if wf is None or wf.error:  # re-checked at each claim: fixed, or chmod-ed, since?
                wf = await self.registry.current(d.workflow)
            if wf is None or wf.error:
                # a pinned execution runs its own version, whatever became of the script
                kept = self.starts.pinned(d, wf)
                if kept is None:
                    why = "missing" if wf is None else f"broken: {wf.error}"
                    await self._unavailable(r, why)
                    return
                wf = kept
            wf = self.starts.version(d, wf)
            r.max_attempts = wf.max_attempts
            r.memory_max = wf.options.memory_max
            code = await self._run(r, wf)
            if code == -signal.SIGKILL and self.store.clock() + margin(self.lease_seconds) >= (
                r.lease_expires_at
            ):
                # It ended itself at its lease's end (ys.guard: the daemon was stopped, say):
                # a lost lease, not the script's own failure.
                r.lost = True
            if r.step_timer is not None:
                if r.step_timed_out:
                    await asyncio.wait([r.step_timer])  # the killed attempt is recorded first
                else:
                    r.step_timer.cancel()
            if wf.kind == "shell" and not (
                r.lost
                or r.acknowledged
                or r.cancel_killed
                or r.start_error
                or r.step_timed_out
                or r.oom_killed  # a delivery past its memory_max, released as a Python one is
            ):
                await self._shell_outcome(r, code, r.log_path)
            if r.acknowledged:
                return
            if not r.lost and (r.cancel_killed or await self._cancel_pending_held(r)):
                why = (
                    "its worker did not reach a step within the grace period"
                    if r.cancel_killed
                    else f"its worker exited with status {code}"
                )
                await self.cancels.end(r, why)
                if r.acknowledged:
                    return
            await self._release(r, code)
        except asyncio.CancelledError:
            raise
        except DaemonUnavailable as exc:  # the loop says once that the database is gone
            log.warning(
                "%s attempt %d: its end was not written (%s); it is delivered again once "
                "its lease has expired",
                d.execution_id,
                d.attempt,
                exc.message,
            )
        except Exception:
            log.exception("delivery of %s failed in the dispatcher", d.execution_id)
        finally:
            if r.ended and (r.proc is None or r.proc.returncode is not None):
                await self._free_slot(r)
            if self.store.shared and r.log_ended:
                self.tails.keep(r)
            if self.running.get(d.execution_id) is r:  # not a newer delivery of the same ID
                del self.running[d.execution_id]
            if self.parts.metrics is not None:
                result = r.result or ("lease_lost" if r.lost else "released")
                self.parts.metrics.delivery_ended(
                    d.workflow, result, time.monotonic() - r.started_at
                )
            self.hub.notify(d.execution_id, may_end=True)
            self.poke()

    async def _free_slot(self, r: Running) -> None:
        """The execution ended without its worker (timed out, cancelled at once), and the
        worker is gone now: the concurrency slot it kept frees (docs/design.md, "Workflow
        options"). Not written (the database away): it frees at the lease's end."""
        try:
            await self.call(self.store.free_slot, r.delivery.execution_id)
        except YsError as exc:
            log.warning("%s: its slot frees at its lease's end: %s", r.delivery.execution_id, exc)

    async def _run(self, r: Running, wf: Workflow) -> int | None:
        """Start the worker and wait for its exit: its exit status, or None when it could not
        start (r.start_error says why). A worker with a memory_max runs in a cgroup of its own
        where the daemon has them (ys.daemon.cgroups), removed once it ended."""
        scope = self.memory.open(wf.options.memory_max)
        try:
            return await self._run_in(r, wf, scope)
        finally:
            if scope is not None:
                r.oom_killed = self.memory.close(scope)

    async def _run_in(self, r: Running, wf: Workflow, scope: Path | None) -> int | None:
        last = await self._launch(r, wf, scope)
        if last is None:
            return None
        assert r.proc is not None
        if r.ended or self._halted:  # timed out, cancelled or halted while it started
            kill_group(r.proc)
        watch = asyncio.create_task(self._watch_lease(r))
        deadline = (
            asyncio.create_task(self.limits.watch_deadline(r))
            if r.delivery.deadline_at is not None
            else None
        )
        renew = asyncio.create_task(self._renew(r)) if wf.kind == "shell" else None
        if r.delivery.cancel_requested or r.cancel_noticed:
            self.cancels.start_grace(r)
        try:
            return await r.proc.wait()
        finally:
            if deadline is not None:
                deadline.cancel()
            await self._finish(r, last, watch, renew)

    async def _launch(self, r: Running, wf: Workflow, scope: Path | None) -> LastLine | None:
        """Start the delivery's worker with its output piped into its log; returns what keeps
        a shell script's last line, or None if it could not start. (The log is opened once
        the launch is on its way: a worker's output waits in its pipe until it is read.)"""
        d = r.delivery
        log_path = self.paths.log_dir(d.execution_id) / f"{d.attempt}.log"
        r.log_path = str(log_path)
        try:
            start = await self.starts.start_of(r, wf)
            listed = self.registry.get(d.workflow)  # the file in the folder, not a kept copy
            env = self.starts.env(d, listed.path if listed is not None else wf.path)
            traceparent = await self.starts.traceparent(d)
            if traceparent is not None:
                env[tracing.ENV] = traceparent
            until = lease_end(r.lease_since, self.lease_seconds)
            worker = await self.parts.launcher.launch(wf, env, log_path, start, until, scope)
        except OSError as exc:  # out of descriptors or processes: delivered again later
            r.start_error = f"the worker could not start: {exc}"
            return None
        r.proc = worker.proc
        r.lifeline = worker.lifeline
        last = LastLine()
        try:
            out = CappedLog(log_path, self.log_max_bytes)
        except OSError as exc:  # out of descriptors, a full disk: delivered again later
            kill_group(r.proc)
            _close_lifeline(r)
            for fd in (worker.output, worker.stdout):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            if worker.channel is not None:
                worker.channel.close()
            r.start_error = f"its log cannot be written: {exc}"
            await r.proc.wait()
            return None
        try:
            if worker.channel is not None:
                if self.parts.open_channel is None:
                    worker.channel.close()
                else:
                    r.channel = self.parts.open_channel(r, worker.channel)
            record_worker(self.paths, r.proc.pid, d.execution_id)
            r.out = out
            r.pipes = [Pipe(worker.output, out.write)]
            if worker.stdout is not None:

                def both(data: bytes) -> None:
                    out.write(data)
                    last.feed(data)

                r.pipes.append(Pipe(worker.stdout, both))
        except BaseException:
            # Not supervised yet (a full disk for its pid file, say): it must not run on
            # unwatched; it is delivered again.
            kill_group(r.proc)
            _close_lifeline(r)
            if r.channel is not None:
                r.channel.close()
            for p in r.pipes:
                p.close()
            for fd in [worker.output, worker.stdout][len(r.pipes) :]:  # not yet a Pipe's
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            out.close()
            raise
        return last

    async def _finish(
        self,
        r: Running,
        last: LastLine,
        watch: asyncio.Task[None],
        renew: asyncio.Task[None] | None,
    ) -> None:
        """The worker exited (or the dispatcher is stopping): end the delivery's processes
        and read the rest of its output."""
        assert r.proc is not None and r.out is not None
        # The delivery ends with its script: what it left running dies with it (and lets go
        # of the pipes its output comes through).
        kill_group(r.proc)
        _close_lifeline(r)
        if r.channel is not None:
            r.channel.close()
        watch.cancel()
        if r.grace is not None:
            r.grace.cancel()
        forget_worker(self.paths, r.proc.pid)
        # The worker no longer renews its lease: while the rest of its output comes, the
        # dispatcher does, so that the outcome or the release still holds it.
        renew = renew or asyncio.create_task(self._renew(r))
        try:
            await drain(r.pipes, PIPE_GRACE)
        finally:
            renew.cancel()
        r.out.close()
        last.close()
        r.last_line = last.line
        r.log_ended = True

    async def _unavailable(self, r: Running, why: str) -> None:
        """The workflow's script is missing or broken: the execution waits for it."""
        d = r.delivery
        record = await self.call(self.store.get, d.execution_id)
        if record is not None and record.cancel_requested:
            # Nothing can run to see the cancellation: it takes effect at once.
            await self.cancels.end(r, f"workflow {d.workflow} is {why}")
            return
        log.warning("%s waits: workflow %s is %s", d.execution_id, d.workflow, why)
        r.result = "unavailable"
        try:
            await self.call(
                self.store.release,
                d.execution_id,
                d.token,
                retry_at=self.store.clock() + 3600,
                reason="workflow_unavailable",
                detail=f"workflow {d.workflow} is {why}",
            )
        except LeaseLost:
            return  # the re-check outlived the lease (a long import): claim_due releases it
        fixed = self.registry.get(d.workflow)
        if fixed is not None and fixed.error is None:
            # fixed while this delivery gave up: the registry's wake skipped it (leased)
            await self.call(
                self.store.request_wake, d.execution_id, reason=f"workflow {d.workflow} changed"
            )

    async def _release(self, r: Running, code: int | None) -> None:
        """The delivery ended without an outcome: its wakes are due again after a delay."""
        d = r.delivery
        detail = r.start_error or f"worker exited with status {code} without an outcome"
        reason = "worker_failed"
        retry_at = self.store.clock() + self.retry_delay(d.attempt)
        if r.lost:
            detail, reason = "the lease was lost; the worker was killed", "lease_lost"
        elif r.step_timed_out:
            detail = f"step {r.step_key!r} ran past its timeout; the worker was killed"
            reason, retry_at = "step_timeout", r.step_retry_at or self.store.clock()
        elif self._stopping and not r.start_error:
            detail, reason = "the daemon stopped; the worker was killed", "daemon_stopped"
        tail = _tail(r.log_path)
        if reason == "worker_failed" and (
            r.oom_killed or (r.memory_max and _out_of_memory(code, tail))
        ):
            detail = f"{MEMORY_LIMIT_ERROR}: past its memory_max ({r.memory_max} bytes); {detail}"
        if tail:
            detail += f"; last output: {tail}"
        log.warning("%s attempt %d: %s", d.execution_id, d.attempt, detail)
        # Only deliveries that ended without an outcome by themselves count toward the cap
        # (not a daemon stop, a lost lease, a step killed for its timeout, a failed start).
        counted = reason == "worker_failed" and not r.start_error
        try:
            exhausted = await self._held_call(
                r,
                self.store.release,
                d.execution_id,
                d.token,
                retry_at=retry_at,
                reason=reason,
                detail=detail,
                max_attempts=r.max_attempts if counted else None,
                on_failure=self.parts.handler_for(d.workflow) if counted else None,
            )
        except LeaseLost:
            return  # the lease already expired; claim_due releases it
        if exhausted:
            r.result = "failed"
            log.warning(
                "%s: %d deliveries without an outcome; it failed", d.execution_id, d.attempt
            )

    async def _cancel_pending_held(self, r: Running) -> bool:
        record = await self._held_call(r, self.store.get, r.delivery.execution_id)
        return record is not None and record.cancel_requested and not record.terminal

    async def _held_call(self, r: Running, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A store call for delivery `r` (a write is fenced by its token), tried again while the database
        cannot be reached (a restart, a connection cut) until its lease is about to expire;
        then DaemonUnavailable: any daemon's claim releases the expired lease (this one's
        too, once the database answers)."""
        delay = DOWN_RETRY_MIN
        while True:
            try:
                return await self.call(fn, *args, **kwargs)
            except DaemonUnavailable:
                if self._stopping or self.store.clock() + delay >= r.lease_expires_at:
                    raise
            await asyncio.sleep(delay)
            delay = min(DOWN_RETRY_MAX, delay * 2)

    async def _renew(self, r: Running) -> None:
        """Renew the lease of a delivery that has no worker doing it: a shell script, or a
        worker that exited while its output is still read."""
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            sent = time.monotonic()
            try:
                r.lease_expires_at = await self.call(
                    self.store.renew,
                    r.delivery.execution_id,
                    r.delivery.token,
                    lease_seconds=self.lease_seconds,
                )
            except LeaseLost:
                return
            except DaemonUnavailable:
                continue  # not renewed: past its lease the lease watch kills the worker
            if r.lifeline is not None:  # the script's guard stops it later now (ys.guard)
                with contextlib.suppress(OSError):  # gone, or full: it stops it at the old end
                    os.write(r.lifeline, b"%r\n" % lease_end(sent, self.lease_seconds))

    async def _shell_outcome(self, r: Running, code: int | None, log_path: Any) -> None:
        """A shell workflow's outcome: suspended if a `ys step` suspended it (whatever the exit
        code), completed on exit 0, failed otherwise with the status and the end of its log."""
        d = r.delivery
        assert code is not None
        if r.suspended:
            outcome = Outcome("suspended")
        elif code == 0:
            outcome = Outcome("completed", {"exit_status": 0, "last_line": r.last_line})
        else:
            status = f"signal {-code}" if code < 0 else f"exit status {code}"
            message = f"{status}: {_tail(log_path, 600)}"
            outcome = Outcome("failed", error=OutcomeError("ExitStatus", message, "EXIT_STATUS"))
        try:
            handler = self.parts.handler_for(d.workflow) if outcome.status == "failed" else None
            await self.call(
                self.store.acknowledge, d.execution_id, d.token, outcome, on_failure=handler
            )
            r.acknowledged = True
            r.result = outcome.status
            if handler is not None and self.parts.metrics is not None:
                self.parts.metrics.admissions.labels("on_failure").inc()
        except LeaseLost:
            pass

    def mark_suspended(self, execution_id: str, token: str) -> None:
        r = self.running.get(execution_id)
        if r is not None and r.delivery.token == token:
            r.suspended = True

    async def _watch_lease(self, r: Running) -> None:
        """Kill the delivery's process group once its lease has expired (the worker stopped
        renewing: frozen, stopped, or cut off)."""
        while True:
            await asyncio.sleep(max(0.05, r.lease_expires_at - self.store.clock()))
            if self.store.clock() >= r.lease_expires_at:
                r.lost = True
                if self.parts.metrics is not None:
                    self.parts.metrics.lease_expiries.inc()
                log.warning("%s: lease expired; killing its worker", r.delivery.execution_id)
                if r.proc is not None:
                    kill_group(r.proc)
                return

    # -- hooks from the API -----------------------------------------------------------------

    def flush_output(self, execution_id: str, token: str) -> None:
        """The worker reports its outcome: its log is made whole first, so whoever sees the
        outcome (`ys wait`, then `ys logs`) sees all that the worker printed."""
        r = self.running.get(execution_id)
        if r is not None and r.delivery.token == token and r.out is not None:
            for p in r.pipes:
                p.read_now()
            r.out.seal()

    def renewed(self, execution_id: str, token: str, expires: float) -> None:
        r = self.running.get(execution_id)
        if r is not None and r.delivery.token == token:
            r.lease_expires_at = max(r.lease_expires_at, expires)  # answers may come out of order

    def acknowledged(self, execution_id: str, token: str, status: str = "") -> bool:
        """An outcome of `execution_id` was recorded; whether this daemon runs that delivery:
        then its worker's end, a moment later, starts the claim round for whatever the outcome
        made due (a parent, a handler): one round per end, not one for the outcome and another
        for the exit (docs/design.md, Deliveries). A worker still there `LINGER` seconds
        after its outcome (a spawned one finishing threads of its own) gets that round then."""
        r = self.running.get(execution_id)
        if r is not None and r.delivery.token == token:
            r.acknowledged = True
            r.result = r.result or status
            asyncio.get_running_loop().call_later(LINGER, self._lingers, r)
            return True
        return False

    def _lingers(self, r: Running) -> None:
        if self.running.get(r.delivery.execution_id) is r:  # its end has not poked yet
            self.poke()

    def delivering(self, execution_id: str, token: str) -> bool:
        """Whether this daemon runs that delivery and it has recorded no outcome yet."""
        r = self.running.get(execution_id)
        return r is not None and r.delivery.token == token and not r.acknowledged

    def step_recorded(self, execution_id: str, token: str, kind: str, status: str) -> None:
        """A worker of this daemon saved a step (over HTTP or its channel): what the
        dispatcher keeps of it (a suspension, a cancel's grace restarted, its duration)."""
        if status == "waiting":
            self.mark_suspended(execution_id, token)
        self.cancels.stepped(execution_id, token)  # a cancel's grace restarts
        self.step_saved(execution_id, token, kind)

    def step_saved(self, execution_id: str, token: str, kind: str) -> None:
        """A step of a running delivery was saved: the time since its start or its previous
        step is that step's duration (what the daemon can see of it)."""
        r = self.running.get(execution_id)
        if r is None or r.delivery.token != token or self.parts.metrics is None:
            return
        now = time.monotonic()
        self.parts.metrics.step_seconds.labels(kind).observe(now - (r.last_step_at or r.started_at))
        r.last_step_at = now

    # -- shutdown ---------------------------------------------------------------------------

    def halt(self) -> None:
        """Claim nothing more and kill every worker now, without a grace period: the
        database was moved (ys.daemon.moved), so its executions run on another one now."""
        self._stopping = True
        self._halted = True  # and a worker still being launched is killed once it is
        self.poke()
        for r in self.running.values():
            if r.proc is not None and r.proc.returncode is None:
                kill_group(r.proc)

    async def stop(self, grace: float) -> None:
        """Stop claiming; give running deliveries `grace` seconds; then kill and release them."""
        self._stopping = True
        self.poke()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        tasks = [r.task for r in self.running.values() if r.task is not None]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=grace)
            for r in list(self.running.values()):
                if r.proc is not None and r.proc.returncode is None:
                    log.warning(
                        "%s: killed at shutdown; it will be delivered again",
                        r.delivery.execution_id,
                    )
                    kill_group(r.proc)
            if pending:
                await asyncio.wait(pending, timeout=10)
        await self.tails.wait(5)  # before the store closes


def _close_lifeline(r: Running) -> None:
    """Let go of a shell script's guard (its group is killed first: it sees the daemon gone)."""
    if r.lifeline is not None:
        with contextlib.suppress(OSError):
            os.close(r.lifeline)
        r.lifeline = None


def _out_of_memory(code: int | None, tail: str) -> bool:
    """Whether a worker under a memory_max died of it: a failed allocation's words in its
    output, or the signals an allocation failure ends a process with."""
    words = ("MemoryError", "Cannot allocate memory", "out of memory", "std::bad_alloc")
    return code in (-signal.SIGABRT, -signal.SIGSEGV) or any(w in tail for w in words)


def _tail(path: Any, limit: int = 400) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            text = f.read().decode("utf-8", errors="replace").strip()
    except OSError:
        return ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-3:])
