"""The effect routes (/v1/effects): inspection, and the effect client's begin, settle
and wait. Not fenced."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from ys.daemon import answers, views
from ys.daemon.api_base import _json, route
from ys.daemon.api_requests import EffectBegin, EffectSettle, EffectsQuery, EffectWait
from ys.errors import NotFoundError

if TYPE_CHECKING:
    from ys.daemon.delivering import Deliveries
    from ys.daemon.parts import DaemonParts


@dataclass(frozen=True)
class EffectRoutes:
    """Effects: not fenced."""

    d: DaemonParts  # the Daemon: store, registry, dispatcher, hub, paths
    deliveries: Deliveries  # what a delivery's worker asks (also its channel)

    @route("GET", "/v1/effects")
    async def effects(self, request: web.Request) -> web.Response:
        q = EffectsQuery.read(request)
        items = await self.d.hub.call(self.d.store.effects, q.status, q.execution_id)
        return _json({"effects": [views.effect(e) for e in items]})

    @route("GET", "/v1/effects/{effect_id}")
    async def effect(self, request: web.Request) -> web.Response:
        effect_id = request.match_info["effect_id"]
        found = await self.d.hub.call(self.d.store.effect, effect_id)
        if found is None:
            raise NotFoundError("NOT_FOUND", f"no effect {effect_id!r}")
        return _json(views.effect(found))

    @route("POST", "/v1/effects/{effect_id}/begin")
    async def effect_begin(self, request: web.Request) -> web.Response:
        req = await EffectBegin.read(request)
        state = await self.deliveries.effect_begin(request.match_info["effect_id"], req)
        return _json(answers.effect_state(state))

    @route("POST", "/v1/effects/{effect_id}/settle")
    async def effect_settle(self, request: web.Request) -> web.Response:
        req = await EffectSettle.read(request)
        state = await self.deliveries.effect_settle(request.match_info["effect_id"], req)
        return _json(answers.effect_state(state))

    @route("POST", "/v1/effects/{effect_id}/wait")
    async def effect_wait(self, request: web.Request) -> web.Response:
        req = await EffectWait.read(request)
        wake_at = await self.deliveries.effect_wait(request.match_info["effect_id"], req)
        return _json(answers.effect_waited(wake_at))
