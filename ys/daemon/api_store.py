"""The durable-value routes (/v1/store): list, get, put (compare-and-set), delete, and a
step's wait for a key."""

from __future__ import annotations

from aiohttp import web

from ys.daemon import views
from ys.daemon.api_base import ApiBase, _body, _json, _text
from ys.errors import InvalidArgument, NotFound


class StoreRoutes(ApiBase):
    """Durable values."""

    async def store_list(self, request: web.Request) -> web.Response:
        items = await self.call(self.d.store.store_list, request.query.get("prefix", ""))
        return _json({"entries": [
            {"key": e["key"], "version": e["version"], "updated_at": views.iso(e["updated_at"])}
            for e in items
        ]})

    async def store_get(self, request: web.Request) -> web.Response:
        key = request.match_info["key"]
        found = await self.call(self.d.store.store_get, key)
        if found is None:
            raise NotFound("NOT_FOUND", f"no value stored under {key!r}")
        return _json({"key": key, "value": views.plain(found["value"]),
                      "version": found["version"], "updated_at": views.iso(found["updated_at"])})

    async def store_put(self, request: web.Request) -> web.Response:
        body = await _body(request)
        if "value" not in body:
            raise InvalidArgument("INVALID_ARGUMENT", "value is required")
        expected = body.get("expected_version")
        if expected is not None and (not isinstance(expected, int) or isinstance(expected, bool)
                                     or expected < 0):
            raise InvalidArgument("INVALID_ARGUMENT", "expected_version must be a whole number")
        out = await self.call(self.d.store.store_put, request.match_info["key"], body["value"],
                              expected)
        if out.get("woken"):
            self.d.dispatcher.poke()
        return _json({"key": out["key"], "version": out["version"],
                      "updated_at": views.iso(out["updated_at"]), "woken": out["woken"]})

    async def store_delete(self, request: web.Request) -> web.Response:
        key = request.match_info["key"]
        deleted = await self.call(self.d.store.store_delete, key)
        if not deleted:
            raise NotFound("NOT_FOUND", f"no value stored under {key!r}")
        return _json({"key": key, "deleted": True})

    async def store_wait(self, request: web.Request) -> web.Response:
        body = await _body(request)
        timeout_at = body.get("timeout_at")
        found = await self.call(
            self.d.store.store_wait, request.match_info["key"], _text(body, "execution_id"),
            _text(body, "step_key"), int(body.get("seen") or 0),
            float(timeout_at) if isinstance(timeout_at, int | float) else None,
        )
        return _json({"found": found})
