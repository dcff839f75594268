"""The dashboard's two API routes: `GET /v1/overview` (the Now page and `ys top` as JSON) and
`POST /v1/ui/tokens` (a one-time token for `ys ui`'s URL). The pages themselves are served
under /ui/ by ys.ui.server; these stay under /v1/, which `ys ui` never forwards, so a
browser can never mint a token for itself."""

from __future__ import annotations

from aiohttp import web

from ys.daemon import overview, views
from ys.daemon.api_base import ApiBase, _json
from ys.ui.auth import Gate


class UiRoutes(ApiBase):
    """The overview and dashboard tokens."""

    _gate: Gate | None = None

    @property
    def gate(self) -> Gate:
        """The dashboard's gate, made at first use (its key lives in the runtime folder)."""
        if self._gate is None:
            self._gate = Gate.in_folder(self.d.paths.runtime)
        return self._gate

    async def overview(self, request: web.Request) -> web.Response:
        return _json(await self.call(overview.read, self.d))

    async def ui_token(self, request: web.Request) -> web.Response:
        token, expires = self.gate.mint()
        return _json(
            {"token": token, "expires_at": views.iso(expires), "path": f"/ui/?token={token}"}, 201
        )
