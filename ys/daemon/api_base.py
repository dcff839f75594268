"""What every group of API routes builds on: JSON responses, request bodies and query
parameters, and `ApiBase`, the daemon handle the route mixins (api_worker, api_store,
api_schedules, api_effects) and `api.Api` share.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from aiohttp import web

from ys.errors import InvalidArgument, NotFound


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(data, separators=(",", ":"), ensure_ascii=False),
        status=status, content_type="application/json",
    )


async def _body(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    try:
        data = await request.json()
    except ValueError:
        raise InvalidArgument("INVALID_ARGUMENT", "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise InvalidArgument("INVALID_ARGUMENT", "the request body must be a JSON object")
    return data


def _int(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgument("INVALID_ARGUMENT", f"{name} must be a whole number") from None


def _float(request: web.Request, name: str, default: float) -> float:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidArgument("INVALID_ARGUMENT", f"{name} must be a number") from None


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str):
        raise InvalidArgument("INVALID_ARGUMENT", f"{name} is required (text)")
    return value


SMALL_BODY = 16 * 1024  # a write whose body is at most this is encoded on the event loop


class ApiBase:
    """The daemon handle every group of routes uses, and the checks they share."""

    def __init__(self, daemon: Any) -> None:
        self.d = daemon  # the Daemon: store, registry, dispatcher, hub, paths

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await self.d.hub.call(fn, *args, **kwargs)

    async def write(self, request: web.Request, name: str, *args: Any, **kwargs: Any) -> Any:
        """The store's write `name` (admit, acknowledge) for a request whose params or result
        the store encodes. A small body is encoded here and the write awaited (`<name>_async`):
        the group writer commits it with the other writes of its batch and answers this loop
        once per batch, no thread hand-off. A big one is encoded in the thread pool: encoding
        64 KiB takes tens of ms, which would hold up every other request on the loop."""
        store = self.d.store
        if len(await request.read()) <= SMALL_BODY:  # the body as read (and inflated)
            return await getattr(store, f"{name}_async")(*args, **kwargs)
        return await self.call(getattr(store, name), *args, **kwargs)

    def _token(self, request: web.Request) -> str:
        token = request.headers.get("X-Ys-Token")
        if not token:
            raise InvalidArgument("INVALID_ARGUMENT", "this route needs the X-Ys-Token header")
        return token

    async def known_workflow(self, name: str) -> None:
        """WORKFLOW_NOT_FOUND with the closest names, after one more look at the folder."""
        reg = self.d.registry
        if reg.get(name) is None and isinstance(name, str) and "/" not in name and name:
            for candidate in (f"{name}.py", name):
                path = reg.folder / candidate
                if path.exists():
                    await reg.refresh(path)
        if reg.get(name) is None:
            close = difflib.get_close_matches(str(name), list(reg.workflows), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else (
                f"; scripts go in {reg.folder}")
            raise NotFound("WORKFLOW_NOT_FOUND", f"no workflow named {name!r}{hint}",
                           suggestions=close)
