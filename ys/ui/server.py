"""The dashboard's routes under /ui/, the gate in front of them, and the long polls that keep
a page live.

Every request passes `Dashboard._guard`: a one-time token from `ys ui` is traded for a session
cookie (and the URL cleaned of it); without a valid cookie the answer is 403; a POST also
needs the session's CSRF token and, when the browser says where it comes from, this origin.
Every answer forbids framing (frame-ancestors 'none') and loading anything from elsewhere.

A page's live region is re-fetched by htmx with `?live=<etag>`: the request waits until the
region's HTML differs from the one the browser has (re-rendered at each change the hub
announces, and every RECHECK seconds for what it does not announce) or LIVE_SECONDS pass.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ys.errors import YsError
from ys.ui import actions, pages
from ys.ui.auth import Gate

if TYPE_CHECKING:
    from ys.daemon.parts import DaemonParts

STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {".css": "text/css", ".js": "text/javascript"}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
REFUSED_STYLE = (
    "body{font:15px/1.5 system-ui,sans-serif;max-width:36em;margin:12vh auto;"
    "padding:0 20px}h1{font-size:20px}code{font-size:14px}"
    "@media (prefers-color-scheme:dark){body{background:#0d1117;color:#e6edf3}}"
)
REFUSED_CSP = (
    "default-src 'none'; style-src 'sha256-"
    + base64.b64encode(hashlib.sha256(REFUSED_STYLE.encode()).digest()).decode()
    + "'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'"
)
LIVE_SECONDS = 25.0
RECHECK = 2.0
NAV = [
    ("now", "/ui/", "Now"),
    ("executions", "/ui/executions", "Executions"),
    ("schedules", "/ui/schedules", "Schedules"),
    ("effects", "/ui/effects", "Effects"),
    ("values", "/ui/values", "Values"),
    ("workflows", "/ui/workflows", "Workflows"),
]

Builder = Callable[[Any, Mapping[str, Any], Mapping[str, str]], dict[str, Any]]
Handler = Callable[[web.Request, str], Awaitable[web.StreamResponse]]


def install(app: web.Application, dashboard: Dashboard) -> None:
    """Serve the dashboard's pages under /ui/ (Jinja2 loads at the first page)."""
    app.add_routes(dashboard.routes())


class Dashboard:
    """The dashboard over the daemon's parts (its store, hub, dispatcher; its buttons call
    ys.daemon.operations, as the API's routes do)."""

    def __init__(self, d: DaemonParts) -> None:
        self.d = d
        self._env: Any = None
        self._gate: Gate | None = None

    @property
    def gate(self) -> Gate:
        """The dashboard's gate, made at first use (its key lives in the runtime folder)."""
        if self._gate is None:
            self._gate = Gate.in_folder(self.d.paths.runtime)
        return self._gate

    def mint(self) -> tuple[str, float]:
        """A one-time token for `ys ui`'s URL (the daemon's POST /v1/ui/tokens) and when it
        expires."""
        return self.gate.mint()

    @property
    def env(self) -> Any:
        if self._env is None:
            from ys.ui.render import environment

            self._env = environment()
        return self._env

    def routes(self) -> list[web.RouteDef]:
        g = self._guard
        page = self._page
        x = "/ui/executions/{id}"
        return [
            web.get("/ui", g(self._to_now)),
            web.get("/ui/", g(page(pages.now, "now.html", "now"))),
            web.get("/ui/executions", g(page(pages.executions, "executions.html", "executions"))),
            web.get(x, g(page(pages.execution, "execution.html", "executions"))),
            web.get(x + "/logs/{attempt}", g(self._raw_log)),
            web.post(x + "/{action}", g(self._execution_action)),
            web.get("/ui/schedules", g(page(pages.schedules, "schedules.html", "schedules"))),
            web.post("/ui/schedules/{name}/{action}", g(self._schedule_action)),
            web.post("/ui/workflows/{name}/{action}", g(self._workflow_action)),
            web.get("/ui/effects", g(page(pages.effects, "effects.html", "effects"))),
            web.get("/ui/effects/{effect_id}", g(page(pages.effect, "effect.html", "effects"))),
            web.get("/ui/values", g(page(pages.values, "values.html", "values"))),
            web.get("/ui/values/{key}", g(page(pages.value, "value.html", "values"))),
            web.get("/ui/workflows", g(page(pages.workflows, "workflows.html", "workflows"))),
            web.get("/ui/static/{name}", g(self._static)),
            web.route("*", "/ui/{tail:.*}", g(self._nowhere)),  # last: what nothing else is
        ]

    # -- the gate ---------------------------------------------------------------------------

    def _guard(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def guarded(request: web.Request) -> web.StreamResponse:
            started = time.perf_counter()
            resp = await self._admit(request, handler)
            for name, value in HEADERS.items():
                resp.headers.setdefault(name, value)
            if "Cache-Control" not in resp.headers:
                resp.headers["Cache-Control"] = "no-store"
            ms = (time.perf_counter() - started) * 1000
            resp.headers["Server-Timing"] = f"app;dur={ms:.1f}"
            return resp

        return guarded

    async def _admit(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        gate = self.gate
        cookie = request.cookies.get(gate.cookie, "")
        token = request.query.get("token")
        if token is not None and request.method == "GET":
            fresh = gate.spend(token)
            if fresh is None and not gate.session_ok(cookie):
                return self._refuse(
                    "This link was used already or has expired. Run `ys ui` again for a new one."
                )
            kept = [(k, v) for k, v in request.query.items() if k != "token"]
            resp = _redirect(str(request.rel_url.with_query(kept)))
            if fresh is not None:
                resp.set_cookie(
                    gate.cookie,
                    fresh,
                    path="/ui/",
                    httponly=True,
                    samesite="Strict",
                    max_age=7 * 86400,
                )
            return resp
        if not gate.session_ok(cookie):
            return self._refuse(
                "This dashboard opens with the link `ys ui` prints. Run `ys ui` for a new one."
            )
        if request.method == "POST":
            refusal = await self._check_post(request, cookie)
            if refusal is not None:
                return refusal
        try:
            return await handler(request, cookie)
        except YsError as exc:
            return self._html(
                "error.html",
                {"code": exc.code, "message": exc.message, "section": ""},
                cookie,
                exc.http_status,
            )

    async def _check_post(self, request: web.Request, cookie: str) -> web.Response | None:
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            return self._refuse("This form came from another site.")
        if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            return self._refuse("This form came from another site.")
        form = await request.post()
        csrf = form.get("csrf")
        if not self.gate.csrf_ok(cookie, csrf if isinstance(csrf, str) else None):
            return self._refuse(
                "This form is stale (its CSRF token does not match). Reload the page and try again."
            )
        return None

    def _refuse(self, message: str) -> web.Response:
        """403, on a page that needs nothing else (the stylesheet is behind the gate too)."""
        html = self.env.get_template("refused.html").render(message=message, style=REFUSED_STYLE)
        resp = web.Response(text=html, status=403, content_type="text/html")
        resp.headers["Content-Security-Policy"] = REFUSED_CSP
        return resp

    # -- pages ------------------------------------------------------------------------------

    def _context(self, cookie: str, section: str, request: web.Request | None) -> dict[str, Any]:
        return {
            "csrf": self.gate.csrf(cookie) if cookie else "",
            "nav": NAV,
            "section": section,
            "path": request.path if request is not None else "/ui/",
        }

    def _html(
        self, template: str, ctx: dict[str, Any], cookie: str, status: int = 200
    ) -> web.Response:
        html = self.env.get_template(template).render(
            {**self._context(cookie, ctx.get("section", ""), None), **ctx}
        )
        return web.Response(text=html, status=status, content_type="text/html")

    def _page(self, builder: Builder, template: str, section: str) -> Handler:
        async def handler(request: web.Request, cookie: str) -> web.StreamResponse:
            since = request.query.get("live")
            deadline = time.monotonic() + LIVE_SECONDS
            while True:
                ev = self.d.hub.watch_any()  # before the read: no change slips between
                inner, full = await self.d.hub.call(
                    self._render, builder, template, section, request, cookie, since is None
                )
                etag = hashlib.sha256(inner.encode()).hexdigest()[:16]
                left = deadline - time.monotonic()
                closing = request.transport is None or request.transport.is_closing()
                if since is None or etag != since or left <= 0 or closing or self.d.hub.stopping:
                    break
                await self.d.hub.wait(ev, min(RECHECK, left))
            live_url = str(request.rel_url.update_query(live=etag))
            region = self.env.get_template("_live.html").render(inner=inner, live_url=live_url)
            if since is not None:
                return web.Response(text=region, content_type="text/html")
            return web.Response(text=full.replace("\x00LIVE\x00", region), content_type="text/html")

        return handler

    def _render(
        self,
        builder: Builder,
        template: str,
        section: str,
        request: web.Request,
        cookie: str,
        whole: bool,
    ) -> tuple[str, str]:
        """The live region's HTML, and (when `whole`) the page around a placeholder for it."""
        ctx = builder(self.d, request.query, request.match_info)
        ctx.update(self._context(cookie, section, request))
        tmpl = self.env.get_template(template)
        context = tmpl.new_context(ctx)
        inner = "".join(tmpl.blocks["live"](context))
        full = tmpl.render(**ctx, live="\x00LIVE\x00") if whole else ""
        return inner, full

    async def _nowhere(self, request: web.Request, cookie: str) -> web.StreamResponse:
        return self._html(
            "error.html",
            {"code": "NOT_FOUND", "section": "", "message": f"no page {request.path}"},
            cookie,
            404,
        )

    async def _to_now(self, request: web.Request, cookie: str) -> web.StreamResponse:
        return _redirect("/ui/", 302)

    async def _raw_log(self, request: web.Request, cookie: str) -> web.StreamResponse:
        path = await self.d.hub.call(
            pages.log_file, self.d, request.match_info["id"], request.match_info["attempt"]
        )
        data = await self.d.hub.call(path.read_bytes)
        return web.Response(body=data, content_type="text/plain", charset="utf-8")

    async def _static(self, request: web.Request, cookie: str) -> web.StreamResponse:
        name = request.match_info["name"]
        path = STATIC / name
        kind = STATIC_TYPES.get(path.suffix)
        if "/" in name or name.startswith(".") or kind is None or not path.is_file():
            return self._html(
                "error.html",
                {"code": "NOT_FOUND", "section": "", "message": f"no file {name!r}"},
                cookie,
                404,
            )
        resp = web.Response(body=path.read_bytes(), content_type=kind)
        resp.headers["Cache-Control"] = "private, max-age=3600"
        return resp

    # -- actions ----------------------------------------------------------------------------

    async def _execution_action(self, request: web.Request, cookie: str) -> web.StreamResponse:
        execution_id = request.match_info["id"]
        action = request.match_info["action"]
        back = f"/ui/executions/{_seg(execution_id)}"
        return await self._act(
            request,
            cookie,
            action,
            "execution",
            execution_id,
            back,
            lambda: actions.on_execution(self.d, action, execution_id),
        )

    async def _schedule_action(self, request: web.Request, cookie: str) -> web.StreamResponse:
        name = request.match_info["name"]
        action = request.match_info["action"]
        return await self._act(
            request,
            cookie,
            action,
            "schedule",
            name,
            "/ui/schedules",
            lambda: actions.on_schedule(self.d, action, name),
        )

    async def _workflow_action(self, request: web.Request, cookie: str) -> web.StreamResponse:
        name = request.match_info["name"]
        action = request.match_info["action"]
        return await self._act(
            request,
            cookie,
            action,
            "workflow",
            name,
            "/ui/workflows",
            lambda: actions.on_workflow(self.d, action, name),
        )

    async def _act(
        self,
        request: web.Request,
        cookie: str,
        action: str,
        what: str,
        name: str,
        back: str,
        run: Callable[[], Awaitable[str]],
    ) -> web.StreamResponse:
        """A POST without confirm=1 answers with a page that asks (ys.js asks in the page
        instead, and sends confirm=1); with it, the action runs and the browser goes back."""
        actions.check(what, action)
        form = await request.post()
        if form.get("confirm") != "1":
            return self._html(
                "confirm.html",
                {
                    "action": action,
                    "what": what,
                    "name": name,
                    "back": back,
                    "post": request.path,
                    "section": "",
                },
                cookie,
            )
        done = await run()
        return _redirect(f"{back}?done={done}")


def _redirect(location: str, status: int = 303) -> web.Response:
    return web.Response(status=status, headers={"Location": location})


def _seg(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")
