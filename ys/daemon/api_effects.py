"""The effect routes (/v1/effects): inspection, and the effect client's begin, settle
and wait. Not fenced."""

from __future__ import annotations

from aiohttp import web

from ys.daemon import views
from ys.daemon.api_base import ApiBase, _json
from ys.daemon.api_requests import EffectBegin, EffectSettle, EffectsQuery, EffectWait
from ys.errors import NotFoundError


class EffectRoutes(ApiBase):
    """Effects: not fenced."""

    async def effects(self, request: web.Request) -> web.Response:
        q = EffectsQuery.read(request)
        items = await self.call(self.d.store.effects, q.status, q.execution_id)
        return _json({"effects": [views.effect(e) for e in items]})

    async def effect(self, request: web.Request) -> web.Response:
        effect_id = request.match_info["effect_id"]
        found = await self.call(self.d.store.effect, effect_id)
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
