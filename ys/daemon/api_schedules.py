"""The schedule routes (/v1/schedules), workflow pauses (/v1/workflows/W/pause) and
housekeeping (/v1/gc, /v1/backup)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from ys.daemon import operations, views
from ys.daemon.api_base import Body, Query, _json, route
from ys.daemon.api_requests import Gc, ScheduleAdd, ScheduleSet
from ys.errors import InvalidArgument, YsError

if TYPE_CHECKING:
    from ys.daemon.parts import DaemonParts


S = "/v1/schedules/{name}"


@dataclass(frozen=True)
class ScheduleRoutes:
    """Schedules and housekeeping."""

    d: DaemonParts  # the Daemon: store, registry, dispatcher, hub, paths

    @route("GET", "/v1/schedules")
    async def schedules(self, request: web.Request) -> web.Response:
        items = await self.d.hub.call(self.d.store.schedules)
        return _json({"schedules": [views.schedule(s) for s in items]})

    @route("GET", S)
    async def schedule(self, request: web.Request) -> web.Response:
        s = await self.d.hub.call(self.d.store.schedule, request.match_info["name"])
        return _json(views.schedule(s))

    @route("POST", "/v1/schedules")
    async def schedule_add(self, request: web.Request) -> web.Response:
        req = await ScheduleAdd.read(request)
        await operations.known_workflow(self.d, req.workflow)
        s = await self.d.hub.call(
            self.d.store.schedule_add,
            req.name,
            req.workflow,
            req.cron,
            tz=req.tz,
            params=req.params,
            catch_up=req.catch_up,
            overlap=req.overlap,
            max_late=req.max_late,
            jitter=req.jitter,
        )
        self.d.scheduler.poke()
        return _json(views.schedule(s), 201)

    @route("PATCH", S)
    async def schedule_set(self, request: web.Request) -> web.Response:
        req = await ScheduleSet.read(request)
        s = await operations.set_schedule(self.d, request.match_info["name"], req)
        return _json(views.schedule(s))

    @route("POST", S + "/run")
    async def schedule_run(self, request: web.Request) -> web.Response:
        eid = await operations.run_schedule(self.d, request.match_info["name"])
        return _json({"execution_id": eid, "started": True}, 201)

    @route("DELETE", S)
    async def schedule_remove(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        await self.d.hub.call(self.d.store.schedule_remove, name)
        return _json({"name": name, "removed": True})

    @route("POST", S + "/pause")
    async def schedule_pause(self, request: web.Request) -> web.Response:
        s = await operations.pause_schedule(self.d, request.match_info["name"], True)
        return _json(views.schedule(s))

    @route("POST", S + "/resume")
    async def schedule_resume(self, request: web.Request) -> web.Response:
        s = await operations.pause_schedule(self.d, request.match_info["name"], False)
        return _json(views.schedule(s))

    @route("GET", S + "/next")
    async def schedule_next(self, request: web.Request) -> web.Response:
        from ys import cron

        n = max(1, min(1000, Query(request).whole("n", 5)))
        s = await self.d.hub.call(self.d.store.schedule, request.match_info["name"])
        if s.paused:  # a paused schedule fires at no time
            return _json({"fire_times": [], "paused": True})
        after = max(self.d.store.clock(), s.cursor)
        off = cron.jitter_offset(s.name, s.jitter)
        try:
            times = [t + off for t in cron.slots_after(s.cron, s.tz, after, n)]
        except ValueError as exc:  # stored before ys refused it (six fields, say)
            raise YsError(
                "FAILED_PRECONDITION",
                f"schedule {s.name!r} cannot fire: {exc}; remove it (ys schedule rm) and add "
                "it again",
            ) from None
        return _json({"fire_times": [views.iso(t) for t in times], "paused": False})

    @route("POST", "/v1/workflows/{name}/pause")
    async def workflow_pause(self, request: web.Request) -> web.Response:
        return _json(await operations.pause_workflow(self.d, request.match_info["name"], True))

    @route("POST", "/v1/workflows/{name}/resume")
    async def workflow_resume(self, request: web.Request) -> web.Response:
        return _json(await operations.pause_workflow(self.d, request.match_info["name"], False))

    @route("POST", "/v1/gc")
    async def gc(self, request: web.Request) -> web.Response:
        req = await Gc.read(request)
        older = self.d.scheduler.retention if req.older_than is None else req.older_than
        ids = await self.d.scheduler.gc(older, req.dry_run)
        return _json({"pruned": ids, "count": len(ids), "dry_run": req.dry_run})

    @route("POST", "/v1/backup")
    async def backup(self, request: web.Request) -> web.Response:
        """A consistent copy of the live SQLite database (`ys backup`); PostgreSQL has pg_dump."""
        b = await Body.read(request)
        target = b.opt_text("path")
        if not target:
            raise InvalidArgument("INVALID_ARGUMENT", "give the backup file's path (path)")
        if self.d.settings.postgres:
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                "the database is PostgreSQL: back it up with pg_dump (and restore with "
                "pg_restore); ys backup copies a SQLite database",
            )
        backup = getattr(self.d.store, "backup")  # noqa: B009 - SQLite's only
        result = await self.d.hub.call(backup, target)
        return _json(result)
