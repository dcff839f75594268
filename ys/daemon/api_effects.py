"""The effect routes (RFC 004, /v1/effects): inspection, and the effect client's begin, settle
and wait. Not fenced."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ys.daemon import views
from ys.daemon.api_base import ApiBase, _json
from ys.daemon.api_requests import EffectBegin, EffectSettle, EffectsQuery, EffectWait
from ys.errors import InvalidArgument, NotFoundError


class EffectRoutes(ApiBase):
    """Effects (RFC 004): not fenced."""

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
        return _json(await self.effect_begin_op(request.match_info["effect_id"], req))

    async def effect_begin_op(self, effect_id: str, req: EffectBegin) -> dict[str, Any]:
        state: dict[str, Any] = await self.call(
            self.d.store.effect_begin,
            req.operation,
            effect_id,
            req.input,
            req.execution_id,
            req.step_key,
        )
        return state

    async def effect_settle(self, request: web.Request) -> web.Response:
        req = await EffectSettle.read(request)
        return _json(await self.effect_settle_op(request.match_info["effect_id"], req))

    async def effect_settle_op(self, effect_id: str, req: EffectSettle) -> dict[str, Any]:
        try:
            state: dict[str, Any] = await self.call(
                self.d.store.effect_settle, req.operation, effect_id, req.result
            )
        except ValueError as exc:
            raise InvalidArgument("INVALID_ARGUMENT", f"result is not canonical: {exc}") from None
        self.d.dispatcher.poke()  # settlement wakes every waiter
        return state

    async def effect_wait(self, request: web.Request) -> web.Response:
        req = await EffectWait.read(request)
        return _json(await self.effect_wait_op(request.match_info["effect_id"], req))

    async def effect_wait_op(self, effect_id: str, req: EffectWait) -> dict[str, Any]:
        first = await self.call(
            self.d.store.effect_wait, effect_id, req.execution_id, req.step_key, req.wake_at
        )
        self.d.dispatcher.poke()
        return {"wake_at": first}
