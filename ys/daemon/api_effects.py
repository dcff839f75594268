"""The effect routes (RFC 004, /v1/effects): inspection, and the effect client's begin, settle
and wait. Not fenced."""

from __future__ import annotations

from aiohttp import web

from ys.daemon import views
from ys.daemon.api_base import ApiBase, _body, _json, _text
from ys.errors import InvalidArgument, NotFound


class EffectRoutes(ApiBase):
    """Effects (RFC 004): not fenced."""

    async def effects(self, request: web.Request) -> web.Response:
        status = request.query.get("status") or None
        if status not in (None, "pending", "settled", "conflict"):
            raise InvalidArgument("INVALID_ARGUMENT",
                                  "status must be pending, settled or conflict")
        items = await self.call(self.d.store.effects, status,
                                request.query.get("execution") or None)
        return _json({"effects": [views.effect(e) for e in items]})

    async def effect(self, request: web.Request) -> web.Response:
        effect_id = request.match_info["effect_id"]
        found = await self.call(self.d.store.effect, effect_id)
        if found is None:
            raise NotFound("NOT_FOUND", f"no effect {effect_id!r}")
        return _json(views.effect(found))

    async def effect_begin(self, request: web.Request) -> web.Response:
        body = await _body(request)
        state = await self.call(
            self.d.store.effect_begin, body.get("operation"), request.match_info["effect_id"],
            body.get("input"), _text(body, "execution_id"), _text(body, "step_key"),
        )
        return _json(state)

    async def effect_settle(self, request: web.Request) -> web.Response:
        body = await _body(request)
        try:
            state = await self.call(
                self.d.store.effect_settle, _text(body, "operation"),
                request.match_info["effect_id"], _text(body, "result"),
            )
        except ValueError as exc:
            raise InvalidArgument("INVALID_ARGUMENT", f"result is not canonical: {exc}") from None
        self.d.dispatcher.poke()  # settlement wakes every waiter
        return _json(state)

    async def effect_wait(self, request: web.Request) -> web.Response:
        body = await _body(request)
        wake_at = body.get("wake_at")
        if not isinstance(wake_at, int | float):
            raise InvalidArgument("INVALID_ARGUMENT", "wake_at (epoch seconds) is required")
        first = await self.call(
            self.d.store.effect_wait, request.match_info["effect_id"],
            _text(body, "execution_id"), _text(body, "step_key"), float(wake_at),
        )
        self.d.dispatcher.poke()
        return _json({"wake_at": first})
