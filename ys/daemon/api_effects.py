"""The effect routes (/v1/effects): inspection, and the effect client's begin, settle
and wait. Not fenced."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from ys.daemon import views
from ys.daemon.api_base import _json
from ys.daemon.api_requests import EffectBegin, EffectSettle, EffectsQuery, EffectWait
from ys.errors import NotFoundError

if TYPE_CHECKING:
    from ys.daemon.delivering import Deliveries
    from ys.daemon.parts import DaemonParts


class EffectRoutes:
    """Effects: not fenced."""

    def __init__(self, d: DaemonParts, deliveries: Deliveries) -> None:
        self.d = d  # the Daemon: store, registry, dispatcher, hub, paths
        self.deliveries = deliveries  # what a delivery's worker asks (also its channel)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/v1/effects", self.effects),
            web.get("/v1/effects/{effect_id}", self.effect),
            web.post("/v1/effects/{effect_id}/begin", self.effect_begin),
            web.post("/v1/effects/{effect_id}/settle", self.effect_settle),
            web.post("/v1/effects/{effect_id}/wait", self.effect_wait),
        ]

    async def effects(self, request: web.Request) -> web.Response:
        q = EffectsQuery.read(request)
        items = await self.d.hub.call(self.d.store.effects, q.status, q.execution_id)
        return _json({"effects": [views.effect(e) for e in items]})

    async def effect(self, request: web.Request) -> web.Response:
        effect_id = request.match_info["effect_id"]
        found = await self.d.hub.call(self.d.store.effect, effect_id)
        if found is None:
            raise NotFoundError("NOT_FOUND", f"no effect {effect_id!r}")
        return _json(views.effect(found))

    async def effect_begin(self, request: web.Request) -> web.Response:
        req = await EffectBegin.read(request)
        return _json(await self.deliveries.effect_begin(request.match_info["effect_id"], req))

    async def effect_settle(self, request: web.Request) -> web.Response:
        req = await EffectSettle.read(request)
        return _json(await self.deliveries.effect_settle(request.match_info["effect_id"], req))

    async def effect_wait(self, request: web.Request) -> web.Response:
        req = await EffectWait.read(request)
        return _json(await self.deliveries.effect_wait(request.match_info["effect_id"], req))
