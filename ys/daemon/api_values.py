"""The durable-value routes (/v1/store, named for users after `ys store`; "values" in the
code): list, get, put (compare-and-set), delete, and a step's wait for a key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from ys import codec
from ys.daemon import answers, views
from ys.daemon.api_base import _json, route
from ys.daemon.api_requests import ValuePut, ValueWait
from ys.errors import NotFoundError

if TYPE_CHECKING:
    from ys.daemon.delivering import Deliveries
    from ys.daemon.parts import DaemonParts


@dataclass(frozen=True)
class ValueRoutes:
    """Durable values."""

    d: DaemonParts  # the Daemon: store, registry, dispatcher, hub, paths
    deliveries: Deliveries  # what a delivery's worker asks (also its channel)

    @route("GET", "/v1/store")
    async def value_list(self, request: web.Request) -> web.Response:
        items = await self.d.hub.call(self.d.store.value_list, request.query.get("prefix", ""))
        return _json(
            {
                "entries": [
                    {"key": e.key, "version": e.version, "updated_at": views.iso(e.updated_at)}
                    for e in items
                ]
            }
        )

    @route("GET", "/v1/store/{key}")
    async def value_get(self, request: web.Request) -> web.Response:
        key = request.match_info["key"]
        found = await self.d.hub.call(self.d.store.value_get, key)
        if found is None:
            raise NotFoundError("NOT_FOUND", f"no value stored under {key!r}")
        return _json(
            {
                "key": key,
                "value": codec.plain(found.value),
                "version": found.version,
                "updated_at": views.iso(found.updated_at),
            }
        )

    @route("PUT", "/v1/store/{key}")
    async def value_put(self, request: web.Request) -> web.Response:
        req = await ValuePut.read(request)
        out = await self.d.hub.call(
            self.d.store.value_put, request.match_info["key"], req.value, req.expected_version
        )
        if out.woken:
            self.d.dispatcher.poke()
        return _json(
            {
                "key": out.key,
                "version": out.version,
                "updated_at": views.iso(out.updated_at),
                "woken": out.woken,
            }
        )

    @route("DELETE", "/v1/store/{key}")
    async def value_delete(self, request: web.Request) -> web.Response:
        key = request.match_info["key"]
        deleted = await self.d.hub.call(self.d.store.value_delete, key)
        if not deleted:
            raise NotFoundError("NOT_FOUND", f"no value stored under {key!r}")
        return _json({"key": key, "deleted": True})

    @route("POST", "/v1/store/{key}/wait")
    async def value_wait(self, request: web.Request) -> web.Response:
        req = await ValueWait.read(request)
        found = await self.deliveries.value_wait(request.match_info["key"], req)
        return _json(answers.value_waited(found))
