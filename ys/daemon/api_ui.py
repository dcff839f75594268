"""The dashboard's two API routes: `GET /v1/overview` (the Now page and `ys top` as JSON) and
`POST /v1/ui/tokens` (a one-time token for `ys ui`'s URL). The pages themselves are served
under /ui/ by ys.ui.server, mounted by the daemon (ys.daemon.main), which hands these routes
the dashboard's token minting; these stay under /v1/, which `ys ui` never forwards, so a
browser can never mint a token for itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from ys.daemon import overview, views
from ys.daemon.api_base import _json, route
from ys.errors import NotFoundError

if TYPE_CHECKING:
    from ys.daemon.parts import DaemonParts

# A fresh one-time token for the dashboard and when it expires (epoch seconds)
Mint = Callable[[], tuple[str, float]]


@dataclass(frozen=True)
class UiRoutes:
    """The overview and dashboard tokens."""

    d: DaemonParts
    mint: Mint | None  # the mounted dashboard's; None: no dashboard is mounted

    @route("GET", "/v1/overview")
    async def overview(self, request: web.Request) -> web.Response:
        return _json(await self.d.hub.call(overview.read, self.d))

    @route("POST", "/v1/ui/tokens")
    async def ui_token(self, request: web.Request) -> web.Response:
        if self.mint is None:
            raise NotFoundError("NOT_FOUND", "this daemon serves no dashboard")
        token, expires = self.mint()
        return _json(
            {"token": token, "expires_at": views.iso(expires), "path": f"/ui/?token={token}"}, 201
        )
