"""The schedule routes (/v1/schedules) and housekeeping (/v1/gc)."""

from __future__ import annotations

import time

from aiohttp import web

from ys.daemon import views
from ys.daemon.api_base import ApiBase, _body, _int, _json, _text
from ys.errors import InvalidArgument


class ScheduleRoutes(ApiBase):
    """Schedules and housekeeping."""

    async def schedules(self, request: web.Request) -> web.Response:
        items = await self.call(self.d.store.schedules)
        return _json({"schedules": [views.schedule(s) for s in items]})

    async def schedule(self, request: web.Request) -> web.Response:
        s = await self.call(self.d.store.schedule, request.match_info["name"])
        return _json(views.schedule(s))

    async def schedule_add(self, request: web.Request) -> web.Response:
        body = await _body(request)
        workflow = _text(body, "workflow")
        from ys.store.base import check_workflow_name

        check_workflow_name(workflow)
        await self.known_workflow(workflow)
        max_late = body.get("max_late")
        s = await self.call(
            self.d.store.schedule_add, _text(body, "name"), workflow, _text(body, "cron"),
            tz=str(body.get("tz") or "local"), params=body.get("params"),
            catch_up=str(body.get("catch_up") or "once"),
            overlap=str(body.get("overlap") or "skip"),
            max_late=float(max_late) if isinstance(max_late, int | float) else None,
            jitter=float(body.get("jitter") or 0.0),
        )
        self.d.scheduler.poke()
        return _json(views.schedule(s), 201)

    async def schedule_remove(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        await self.call(self.d.store.schedule_remove, name)
        return _json({"name": name, "removed": True})

    async def schedule_pause(self, request: web.Request) -> web.Response:
        s = await self.call(self.d.store.schedule_pause, request.match_info["name"], True)
        return _json(views.schedule(s))

    async def schedule_resume(self, request: web.Request) -> web.Response:
        s = await self.call(self.d.store.schedule_pause, request.match_info["name"], False)
        self.d.scheduler.poke()
        return _json(views.schedule(s))

    async def schedule_next(self, request: web.Request) -> web.Response:
        from ys import cron

        s = await self.call(self.d.store.schedule, request.match_info["name"])
        n = max(1, min(1000, _int(request, "n", 5)))
        after = max(time.time(), s["cursor"])
        off = cron.jitter_offset(s["name"], s["jitter"])
        times = [t + off for t in cron.slots_after(s["cron"], s["tz"], after, n)]
        return _json({"fire_times": [views.iso(t) for t in times]})

    async def gc(self, request: web.Request) -> web.Response:
        body = await _body(request)
        older = body.get("older_than")
        if older is not None and (not isinstance(older, int | float) or older < 0):
            raise InvalidArgument("INVALID_ARGUMENT", "older_than must be seconds >= 0")
        from ys.daemon.scheduler import retention_seconds

        ids = await self.d.scheduler.gc(float(older) if older is not None else
                                        retention_seconds(), bool(body.get("dry_run")))
        return _json({"pruned": ids, "count": len(ids), "dry_run": bool(body.get("dry_run"))})
