"""The scheduler: fires cron schedules, catches up after sleep once, and prunes old records.

It re-reads the wall clock at least every 30 s, so after a suspend, resume or clock change the
next tick sees the jump and applies each schedule's catch-up policy (the planning is pure, in
ys.cron; the fire itself is one store transaction, `schedule_tick`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import shutil
from typing import TYPE_CHECKING

from ys.crashpoints import crash_point
from ys.daemon.outage import Outage
from ys.daemon.scripts import schedule_args
from ys.errors import DaemonUnavailable, YsError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ys.daemon.parts import DaemonParts
    from ys.daemon.registry import Workflow
    from ys.store.protocols import Schedule, ScheduleAction

log = logging.getLogger("ys.scheduler")
MAX_IDLE = 30.0
DAY = 86400.0


class Scheduler:
    def __init__(self, daemon: DaemonParts, retention: float = 30 * DAY) -> None:
        self.d = daemon
        self.retention = retention  # seconds a finished execution is kept (`retention_days`)
        self._poke = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        # A lost database (a PostgreSQL restart) is said once and the tick tried again soon,
        # as the dispatcher's claims are (docs/design.md, "On PostgreSQL")
        self.outage = Outage(log, "scheduling", "the scheduler's store calls work again")

    def poke(self) -> None:
        self._poke.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="scheduler")

    async def stop(self) -> None:
        self._stopping = True
        self.poke()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        while not self._stopping:
            self._poke.clear()
            timeout = MAX_IDLE
            try:
                timeout = min(timeout, await self.tick())
                await self.housekeeping()
                self.outage.back()
            except Exception as exc:  # the database is gone (or a bug): never stop scheduling
                timeout = self.outage.lost(exc)
            try:
                await asyncio.wait_for(self._poke.wait(), max(0.01, timeout))
            except TimeoutError:
                pass

    async def tick(self, now: float | None = None) -> float:
        """Fire every due schedule; returns seconds until the next one may be due."""
        now = self.d.store.clock() if now is None else now
        store = self.d.store
        wait = MAX_IDLE
        for s in await self.d.hub.call(store.schedules):
            if s.paused:
                continue
            due = s.next_fire_at is not None and s.next_fire_at <= now
            if due or s.queued_slot is not None:
                try:
                    await self.d.registry.fresh(s.workflow)  # admitted as the script is now
                    actions = await self.d.hub.call(
                        store.schedule_tick,
                        s.name,
                        now=now,
                        on_failure=self.d.handler_for(s.workflow),
                    )
                except DaemonUnavailable:
                    raise  # not this schedule's fault: the loop tries again (Outage)
                except YsError as exc:
                    log.error("schedule %s: %s", s.name, exc)
                    continue
                self._log(s, actions)
                self.d.metrics.schedule_actions(s.name, actions)
                crash_point("schedule.after_fire")
                if any(a.action == "fired" or a.handler for a in actions):
                    self.d.dispatcher.poke()
                s = await self.d.hub.call(store.schedule, s.name)
            if s.queued_slot is not None:
                wait = min(wait, 1.0)  # waiting for the previous execution to end
            if s.next_fire_at is not None:
                wait = min(wait, max(0.0, s.next_fire_at - store.clock()))
        return wait

    def _log(self, s: Schedule, actions: list[ScheduleAction]) -> None:
        for a in actions:
            when = _iso(a.slot)
            if a.action == "fired":
                how = " (catch-up)" if a.catch_up else (" (queued)" if a.queued else "")
                log.info("schedule %s fired slot %s%s: %s", s.name, when, how, a.execution_id)
            elif a.action == "skipped":
                log.info("schedule %s skipped slot %s: %s", s.name, when, a.why)
            elif a.action == "queued":
                log.info("schedule %s queued slot %s behind the running execution", s.name, when)
            elif a.action == "refused":
                log.error(
                    "schedule %s no longer fires: %s; remove it and add it again",
                    s.name,
                    a.why,
                )
            elif a.action == "missed":
                log.info(
                    "schedule %s will not fire slot %s (%s)%s",
                    s.name,
                    when,
                    a.reason,
                    f"; its handler is {a.handler}" if a.handler else "",
                )
            elif a.action == "caught_up":
                log.info(
                    "schedule %s: the clock jumped; catch-up %s fired %d missed slot(s)",
                    s.name,
                    a.policy,
                    a.fired,
                )

    async def housekeeping(self) -> None:
        """Once a day: prune terminal executions past the retention setting, and their logs."""
        store = self.d.store
        last = await self.d.hub.call(store.setting, "last_gc_at")
        now = store.clock()
        if last is not None and now - float(last) < DAY:
            return
        await self.gc(self.retention)
        await self.d.hub.call(store.set_setting, "last_gc_at", repr(now))

    async def gc(self, older_than: float, dry_run: bool = False) -> list[str]:
        ids: list[str] = await self.d.hub.call(self.d.store.gc, older_than, dry_run=dry_run)
        if not dry_run:
            for execution_id in ids:
                shutil.rmtree(self.d.paths.log_dir(execution_id), ignore_errors=True)
            if ids:
                log.info(
                    "pruned %d terminal executions older than %.0f days and their logs",
                    len(ids),
                    older_than / DAY,
                )
            await self.prune_versions()
            await self.prune_code(older_than)
        return ids

    async def prune_versions(self) -> None:
        """Remove the script copies no live execution needs (each current version stays)."""
        from ys.daemon.versions import prune

        needed = await self.d.hub.call(self.d.store.scripts_needed)
        removed = await asyncio.to_thread(prune, self.d.paths.data / "scripts", needed)
        if removed:
            log.info("pruned %d script versions no live execution needs", len(removed))

    async def prune_code(self, older_than: float) -> None:
        """Remove the compiled scripts no delivery loaded within `older_than` seconds."""
        from ys.worker import codecache

        removed = await asyncio.to_thread(codecache.prune, self.d.paths.data / "code", older_than)
        if removed:
            log.info(
                "pruned %d compiled scripts unused for %.0f days", len(removed), older_than / DAY
            )

    async def sync_declared(self, workflows: Mapping[str, Workflow]) -> None:
        """Schedules declared by scripts (decorator or `# ys:` header) follow their script."""
        store = self.d.store
        declared = {
            name: wf.schedule
            for name, wf in workflows.items()
            if wf.error is None and wf.schedule is not None and wf.schedule.has_rule
        }
        by_hand = {s.name for s in await self.d.hub.call(store.schedules) if s.source != "script"}
        for name, sch in declared.items():
            if name in by_hand:  # `ys schedule add` took the name first: never overwrite it
                log.error(
                    "workflow %s declares a schedule, but a schedule named %s was added "
                    "with `ys schedule add`; remove that one to use the script's",
                    name,
                    name,
                )
                continue
            try:
                args = schedule_args(name, sch)
                await self.d.hub.call(
                    store.schedule_add,
                    name,
                    name,
                    args.cron_expr,
                    tz=args.tz,
                    params=args.params,
                    catch_up=args.catch_up,
                    overlap=args.overlap,
                    max_late=args.max_late,
                    jitter=args.jitter,
                    source="script",
                    replace=True,
                )
            except DaemonUnavailable:
                raise  # the database is away, not the schedule at fault: its change is told again
            except (YsError, ValueError, TypeError) as exc:
                # The registry checks declarations as it loads them; whatever the store still
                # refuses is the script's load error too, not only a line in the log.
                why = exc.message if isinstance(exc, YsError) else str(exc)
                log.error("workflow %s declares a bad schedule: %s", name, why)
                self.d.registry.set_error(name, f"bad schedule: {why}")
        # A script that does not load now (half-saved, a typo) keeps its schedule, its cursor
        # and its pause until it loads again and says otherwise.
        broken = {name for name, wf in self.d.registry.workflows.items() if wf.error is not None}
        broken |= {name for name, wf in workflows.items() if wf.error is not None}
        for s in await self.d.hub.call(store.schedules):
            gone = s.name not in declared and s.name not in broken
            if s.source == "script" and gone:
                await self.d.hub.call(store.schedule_remove, s.name, declared_too=True)
                log.info("schedule %s removed: its script no longer declares it", s.name)
        self.poke()


def _iso(t: float | None) -> str:
    if t is None:
        return "-"
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
