"""`ys ui`: the dashboard in a browser. A local TCP port (127.0.0.1 only) forwarded to the
daemon's socket, which serves the pages under /ui/ and checks who asks (ys.ui.auth).

Only /ui/ is forwarded: the API under /v1/ (which could mint dashboard tokens) stays on the
private socket. A request whose Host is not this address is refused, so a web page that
rebinds its own name to 127.0.0.1 reaches nothing.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ys.commands._opts import Json, add
from ys.commands._output import client, emit_json, fail

if TYPE_CHECKING:
    from aiohttp import web

UPSTREAM_SECONDS = 90.0  # a page's long poll waits up to 25 s
# Headers that pass through, each way (hop-by-hop and length headers never do).
TO_DAEMON = {
    "host",
    "cookie",
    "content-type",
    "accept",
    "origin",
    "referer",
    "user-agent",
    "sec-fetch-site",
    "sec-fetch-mode",
    "sec-fetch-dest",
    "hx-request",
    "hx-current-url",
    "hx-target",
    "hx-trigger",
    "if-none-match",
}
TO_BROWSER = {
    "content-type",
    "set-cookie",
    "location",
    "cache-control",
    "etag",
    "content-security-policy",
    "x-frame-options",
    "x-content-type-options",
    "referrer-policy",
    "cross-origin-resource-policy",
    "server-timing",
}


def _page(status: int, text: str) -> web.Response:
    from aiohttp import web

    html = f"<!doctype html><meta charset=utf-8><title>ys</title><p>{text}</p>"
    return web.Response(
        status=status,
        text=html,
        content_type="text/html",
        headers={
            "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
            "X-Frame-Options": "DENY",
        },
    )


def make_app(socket_path: str, port_of: Any) -> Any:
    """The forwarding app; `port_of()` is the port it listens on (known once bound)."""
    from aiohttp import (
        ClientError,
        ClientSession,
        ClientTimeout,
        DummyCookieJar,
        UnixConnector,
        web,
    )
    from multidict import CIMultiDict
    from yarl import URL

    async def forward(request: web.Request) -> web.StreamResponse:
        port = port_of()
        if request.host not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            return _page(403, "This dashboard answers only at its own address.")
        path = request.rel_url.path
        if path == "/":
            return web.Response(status=302, headers={"Location": "/ui/"})
        if path != "/ui" and not path.startswith("/ui/"):
            return _page(404, 'Nothing here: the dashboard is under <a href="/ui/">/ui/</a>.')
        headers = {k: v for k, v in request.headers.items() if k.lower() in TO_DAEMON}
        body = await request.read()
        session: ClientSession = request.app["session"]
        try:
            async with session.request(
                request.method,
                URL("http://ys" + request.raw_path, encoded=True),
                headers=headers,
                data=body or None,
                allow_redirects=False,
            ) as up:
                data = await up.read()
                back = CIMultiDict((k, v) for k, v in up.headers.items() if k.lower() in TO_BROWSER)
                return web.Response(status=up.status, body=data, headers=back)
        except (TimeoutError, ClientError, OSError):
            return _page(
                502,
                f"The daemon does not answer on {socket_path}; start it with "
                "<code>ys daemon start</code>, then reload.",
            )

    async def start(app: web.Application) -> None:
        app["session"] = ClientSession(
            connector=UnixConnector(path=socket_path),
            cookie_jar=DummyCookieJar(),
            timeout=ClientTimeout(total=UPSTREAM_SECONDS),
            auto_decompress=False,
        )

    async def stop(app: web.Application) -> None:
        await app["session"].close()

    app = web.Application(client_max_size=1024 * 1024)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


async def _serve(socket_path: str, port: int, announce: Any) -> None:
    import asyncio
    import signal

    from aiohttp import web

    bound: list[int] = []
    # On Ctrl-C, a page's long poll in flight is not waited for (it would hold the exit 25 s).
    runner = web.AppRunner(
        make_app(socket_path, lambda: bound[0] if bound else port),
        access_log=None,
        handle_signals=False,
        shutdown_timeout=0.5,
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, reuse_address=False)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        fail(
            "INVALID_ARGUMENT",
            f"cannot listen on 127.0.0.1:{port} ({exc.strerror})",
            hint="choose another --port, or leave it out for a free one",
        )
    server = getattr(site, "_server", None)
    bound.append(server.sockets[0].getsockname()[1] if server and server.sockets else port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        announce(bound[0])
        await stop.wait()
    finally:
        await runner.cleanup()


def ui(
    port: Annotated[
        int,
        typer.Option(
            "--port",
            min=0,
            max=65535,
            help="Listen on this port of 127.0.0.1 (default: a free one).",
        ),
    ] = 0,
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Print the URL; do not open a browser.")
    ] = False,
    json_: Json = False,
) -> None:
    """Open the dashboard: what runs, what waits and why, what failed; cancel and wake.

    Serves the daemon's pages on 127.0.0.1 until Ctrl-C and prints their URL, which carries
    a one-time token: the first visit trades it for a cookie, and every request without that
    cookie is refused. With --json: {"url", "port", "expires_at"} on one line, then it serves.
    """
    with client() as c:
        token = c.ui_token()
        socket_path = c.socket_path

    def announce(bound: int) -> None:
        url = f"http://127.0.0.1:{bound}{token['path']}"
        if json_:
            emit_json({"url": url, "port": bound, "expires_at": token["expires_at"]})
        else:
            sys.stdout.write(url + "\n")
        sys.stdout.flush()
        from ys.commands import _render

        _render.note(
            f"serving the dashboard on http://127.0.0.1:{bound}/ui/ (the link works "
            "once, for 15 minutes); Ctrl-C stops"
        )
        if not no_open:
            import webbrowser

            if not webbrowser.open(url):
                _render.note("no browser to open here: open the link above")

    import asyncio  # here, not at the top: every command's start-up would pay for it

    asyncio.run(_serve(socket_path, port, announce))


def register(app: typer.Typer) -> None:
    add(app, "ui", ui)
