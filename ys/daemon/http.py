"""The HTTP layer under the routes: aiohttp's limits, and the answers it gives by itself in the
API's `{"code", "message"}` JSON shape.

aiohttp parses every request; nothing here reads HTTP. What this module adds:

- `Protocol`, aiohttp's connection handler with JSON instead of plain text for the errors its
  parser finds (a bad request line, a bad `Content-Length`, a header line over the limit, too
  many headers), and a read timeout on a request head: one whose first byte came
  `read_timeout` seconds ago and that is still incomplete closes the connection, so a flood of
  half-sent requests cannot hold the daemon's descriptors.
- `within_limits`, how the API middleware runs a route: a body whose `Content-Length` is over
  the limit is refused (413) before a byte of it is read, and one that has not all arrived
  within the read timeout fails the route's read and is answered 408.
- `expect_handler`, every route's `Expect` handling (aiohttp runs it before the middleware):
  JSON refusals, and no `100 Continue` for a body over the limit.
- `UnixSite`, the aiohttp site that serves the socket with `Protocol`.

Idle keep-alive connections (no byte of a next request) are not partial requests: aiohttp's
keep-alive timeout closes them, and it is left long because `ys.Client` resends only GETs on a
connection the daemon closed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import hdrs, web
from aiohttp.http import HttpVersion11
from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler, RequestPayloadError

log = logging.getLogger("ys.api")

MAX_BODY = 3 * 1024 * 1024  # params are at most 2 MiB encoded, plus the envelope
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class HttpSettings:
    """The server's limits. Lines and headers: aiohttp's defaults, which no ys request nears
    (an ID is at most 256 bytes, 768 percent-encoded). The read timeout and the idle keep-alive
    are the `read_timeout_seconds` and `keepalive_seconds` settings (ys.settings)."""

    max_body: int = MAX_BODY
    max_line_size: int = 8190
    max_field_size: int = 8190
    max_headers: int = 128
    read_timeout: float = 30.0
    # An idle keep-alive connection is closed after this long (aiohttp's own default is an
    # hour, which lets a flood of idle connections hold the daemon's descriptors). Clients
    # notice a closed connection before they reuse it (ys.client.Transport).
    keepalive_timeout: float = 75.0


SETTINGS = web.AppKey("ys_http_settings", HttpSettings)


def error_response(
    status: int, message: str, code: str = "INVALID_ARGUMENT", *, close: bool = False
) -> web.Response:
    resp = web.Response(
        text=json.dumps({"code": code, "message": message}, ensure_ascii=False),
        status=status,
        content_type="application/json",
    )
    if close:  # the rest of the request may still be on the wire: this connection is done
        resp.force_close()
    return resp


def too_large(request: web.BaseRequest, max_body: int) -> web.Response:
    return error_response(
        413,
        f"{request.method} {request.path}: the request body is over "
        f"{max_body // (1024 * 1024)} MiB; params are limited to 2 MiB encoded",
        close=True,
    )


async def expect_handler(request: web.Request) -> web.StreamResponse | None:
    """aiohttp's handling of `Expect` (which runs before the middleware), refusing in JSON: an
    unknown expectation is 417, and a body over the limit is refused (413) instead of being
    invited with `100 Continue`."""
    if request.version != HttpVersion11:
        return None
    expect = request.headers.get(hdrs.EXPECT, "")
    if expect.lower() != "100-continue":
        return error_response(
            417,
            f"unknown Expect: {expect[:100]!r}; send Expect: 100-continue or no Expect header",
            close=True,
        )
    declared = request.content_length
    if declared is not None and declared > request.app[SETTINGS].max_body:
        return too_large(request, request.app[SETTINGS].max_body)
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0  # as aiohttp's own: the answer proper has not started
    return None


class BodyTimeout(TimeoutError):
    """The request's body did not arrive within the read timeout (raised in the route's read;
    a TimeoutError so that aiohttp's lingering read after the answer takes it quietly)."""


async def within_limits(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Run the route with the body limits: a `Content-Length` over the limit is refused (413)
    before a byte of the body is read; a body that has not all arrived `read_timeout` seconds
    after its head fails the route's read and is answered 408."""
    if not request.can_read_body:
        return await handler(request)
    settings = request.app[SETTINGS]
    declared = request.content_length
    if declared is not None and declared > settings.max_body:
        return too_large(request, settings.max_body)
    body = request.content

    def expire() -> None:
        if not body.is_eof():  # not all of it came: the read waiting for the rest fails
            body.set_exception(BodyTimeout())

    deadline = asyncio.get_running_loop().call_later(settings.read_timeout, expire)
    try:
        return await handler(request)
    except BodyTimeout:
        return error_response(
            408,
            f"{request.method} {request.path}: the request body did not arrive within "
            f"{settings.read_timeout:g} s; send the whole body with its request",
            close=True,
        )
    except web.HTTPRequestEntityTooLarge:  # a chunked body has no Content-Length to check
        return too_large(request, settings.max_body)
    except RequestPayloadError as exc:
        return error_response(
            400,
            f"{request.method} {request.path}: the request body could not be read "
            f"({_first_line(exc)}); send a body of the length it declares",
            close=True,
        )
    finally:
        deadline.cancel()


def _first_line(exc: BaseException | None) -> str:
    """aiohttp's parser messages draw the bad bytes on further lines; the first one says it."""
    if exc is None:
        return "no detail"
    text = str(exc.message if isinstance(exc, HttpProcessingError) else exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__).rstrip(":")[:200]


def protocol_error(exc: BaseException | None, status: int) -> tuple[int, str, str]:
    """(status, code, message) for an error aiohttp's parser or protocol found."""
    if isinstance(exc, LineTooLong):
        return (
            431,
            "INVALID_ARGUMENT",
            (
                f"a request line or header line is over {exc.args[1]} bytes; "
                "send shorter headers and put data in the JSON body"
            ),
        )
    if isinstance(exc, BadHttpMessage) and "Too many headers" in exc.message:
        return (
            431,
            "INVALID_ARGUMENT",
            ("the request has too many header lines; send only the headers docs/API.md names"),
        )
    if isinstance(exc, HttpProcessingError) or 400 <= status < 500:
        return (
            400,
            "INVALID_ARGUMENT",
            (
                f"the request is not HTTP/1.1 that the daemon can read ({_first_line(exc)}); "
                "see docs/API.md for the request format"
            ),
        )
    return 500, "INTERNAL", "internal error while reading the request; the daemon log says more"


class Protocol(RequestHandler):
    """aiohttp's connection handler: JSON error answers, and a read timeout on request heads."""

    def __init__(self, manager: web.Server, *, read_timeout: float, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._read_timeout = read_timeout
        self._idle_heads = 0  # request heads parsed when the connection was last idle
        self._head_timer: asyncio.TimerHandle | None = None

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:  # as aiohttp's own: an answer is already half sent
            raise ConnectionError("an answer was already sent; no error answer can follow")
        status, code, text = protocol_error(exc, status)
        if status >= 500:
            log.error("internal error reading a request", exc_info=exc)
        else:
            log.info("refused a request that is not HTTP/1.1 the daemon can read: %s", text)
        return error_response(status, text, code, close=True)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # A connection that never sends a byte is a request head that never completes.
        self._head_timer = self._loop.call_later(
            self._read_timeout, self._head_timed_out, self._request_count
        )

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._request_count != self._idle_heads:
            self._cancel_head_timer()  # a whole head came: its body is within_limits' to time
        elif self._head_timer is None and self.transport is not None:
            # The first bytes of a head: it has read_timeout to be complete.
            self._head_timer = self._loop.call_later(
                self._read_timeout, self._head_timed_out, self._request_count
            )

    async def finish_response(
        self, request: web.BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        out = await super().finish_response(request, resp, start_time)
        self._idle_heads = self._request_count  # what arrives from now on is another request
        return out

    def _head_timed_out(self, heads: int) -> None:
        self._head_timer = None
        if self._request_count == heads:  # no head completed since its first bytes came
            log.info(
                "closed a connection whose request head was not complete within %g s",
                self._read_timeout,
            )
            self.force_close()

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)


class UnixSite(web.BaseSite):
    """The daemon's socket, served by `Protocol` with `settings` (in place of the connection
    handler and options aiohttp's own sites take from the runner)."""

    def __init__(self, runner: web.BaseRunner, path: str, settings: HttpSettings) -> None:
        super().__init__(runner)
        self._path = path
        self._settings = settings

    @property
    def name(self) -> str:
        return f"http://unix:{self._path}:"

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None
        s = self._settings

        def protocol() -> Protocol:
            return Protocol(
                server,
                loop=loop,
                access_log=None,
                read_timeout=s.read_timeout,
                keepalive_timeout=s.keepalive_timeout,
                max_line_size=s.max_line_size,
                max_field_size=s.max_field_size,
                max_headers=s.max_headers,
            )

        self._server = await loop.create_unix_server(protocol, self._path, backlog=self._backlog)
