"""What every group of API routes builds on: JSON responses; request bodies and query
parameters read field by field with their checks (`Body`, `Query`: a malformed one is 400
INVALID_ARGUMENT naming the field, never a 500), which each route's typed request in
api_requests is parsed with; and what the route groups (api_worker, api_values,
api_schedules, api_effects, api_events, api_ui and api's) share: a write sized to its body,
the delivery token.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from aiohttp import web

from ys.codec import MAX_DEPTH
from ys.contract import check_object, check_seconds, check_time, json_kind
from ys.errors import InvalidArgument

if TYPE_CHECKING:
    from ys.daemon.hub import Hub

P = ParamSpec("P")
T = TypeVar("T")


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(data, separators=(",", ":"), ensure_ascii=False),
        status=status,
        content_type="application/json",
    )


MAX_WHOLE = 2**63 - 1  # SQLite's INTEGER: a bigger whole number cannot even be compared


def invalid(message: str) -> InvalidArgument:
    """The refusal of a request's field: 400 INVALID_ARGUMENT."""
    return InvalidArgument("INVALID_ARGUMENT", message)


async def _body(request: web.Request) -> dict[str, object]:
    """The request's body, a JSON object (no body is `{}`). JSON is UTF-8 (RFC 8259), so the
    bytes are decoded by json itself whatever charset the Content-Type names."""
    if not request.can_read_body:
        return {}
    try:
        data = json.loads(await request.read())
    except web.RequestPayloadError as exc:  # a body that does not inflate (Content-Encoding)
        why = (str(exc).strip().splitlines() or [""])[-1].strip()  # "400, message:\n  ..."
        raise invalid(
            f"the request body cannot be read ({why}); send it uncompressed, or "
            "compressed whole as its Content-Encoding says"
        ) from None
    except RecursionError:
        raise invalid(
            "the request body nests too deeply to read (durable values nest at "
            f"most {MAX_DEPTH} levels)"
        ) from None
    except ValueError:  # JSONDecodeError, UnicodeDecodeError, an int of over 4300 digits
        raise invalid("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise invalid("the request body must be a JSON object")
    return data  # a JSON object's keys are text


class Body:
    """A request body's fields, each read with its check: a field of the wrong type or out of
    range is INVALID_ARGUMENT naming the field. A bool is not a number, and NaN and Infinity
    (which Python's json reads) are never numbers here. JSON null is the same as an absent
    field where the field is optional (`opt_*`: None); where it has a default, null is not a
    value of its type and is refused. Routes read their bodies through this once, into a
    typed request (api_requests), before anything else, the delivery token included."""

    def __init__(self, data: dict[str, object]) -> None:
        self.data = data  # the JSON object as sent, read only through the methods below

    @classmethod
    async def read(cls, request: web.Request) -> Body:
        return cls(await _body(request))

    def has(self, name: str) -> bool:
        return name in self.data

    def any(self, name: str) -> object:
        """A field of any JSON value, checked later by the store (params, a durable value)."""
        return self.data.get(name)

    def _defaulted(self, name: str, what: str) -> bool:
        """Whether the field is absent (its default applies); null is refused."""
        if name not in self.data:
            return True
        if self.data[name] is None:
            raise invalid(f"{name} must be {what}, not null (leave it out for the default)")
        return False

    def opt_text(self, name: str) -> str | None:
        value = self.data.get(name)
        if value is not None and not isinstance(value, str):
            raise invalid(f"{name} must be text, not {json_kind(value)}")
        return value

    def text(self, name: str, default: str) -> str:
        """The text, or `default` when it is absent or empty."""
        if self._defaulted(name, "text"):
            return default
        return self.opt_text(name) or default

    def required_text(self, name: str) -> str:
        value = self.opt_text(name)
        if value is None:
            raise invalid(f"{name} is required (text)")
        return value

    def choice(self, name: str, options: tuple[str, ...], default: str) -> str:
        value = self.text(name, default)
        if value not in options:
            raise invalid(f"{name} must be one of {', '.join(options)}, not {value!r}")
        return value

    def flag(self, name: str) -> bool:
        """true or false; absent is false."""
        if self._defaulted(name, "true or false"):
            return False
        value = self.data[name]
        if not isinstance(value, bool):
            raise invalid(f"{name} must be true or false, not {json_kind(value)}")
        return value

    def opt_whole(self, name: str, *, least: int = 0) -> int | None:
        value = self.data.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid(f"{name} must be a whole number, not {json_kind(value)}")
        return in_range(name, value, least)

    def whole(self, name: str, default: int, *, least: int = 0) -> int:
        if self._defaulted(name, "a whole number"):
            return default
        value = self.opt_whole(name, least=least)
        assert value is not None
        return value

    def opt_seconds(self, name: str) -> float | None:
        value = self.data.get(name)
        return None if value is None else check_seconds(value, name)

    def seconds(self, name: str, default: float) -> float:
        if self._defaulted(name, "a number of seconds"):
            return default
        return check_seconds(self.data[name], name)

    def opt_time(self, name: str) -> float | None:
        """Epoch seconds within 1970..9999 (check_time, the store's one check of a time)."""
        value = self.data.get(name)
        return None if value is None else check_time(value, name)

    def time(self, name: str) -> float:
        value = self.opt_time(name)
        if value is None:
            raise invalid(f"{name} (epoch seconds) is required")
        return value

    def opt_object(self, name: str) -> dict[str, object] | None:
        """An object field (params, context, an outcome), its fields read by whoever takes it."""
        return check_object(self.data.get(name), name)


def in_range(name: str, value: int, least: int) -> int:
    if not least <= value <= MAX_WHOLE:
        raise invalid(f"{name} must be a whole number from {least} to {MAX_WHOLE}, not {value}")
    return value


class Query:
    """A request's query parameters, each read with its check (see Body)."""

    def __init__(self, request: web.Request) -> None:
        self.query = request.query

    def text(self, name: str) -> str | None:
        """The parameter, or None when it is absent or empty."""
        return self.query.get(name) or None

    def texts(self, name: str) -> list[str]:
        return [v for v in self.query.getall(name, []) if v]

    def opt_whole(self, name: str, *, least: int = 0) -> int | None:
        raw = self.query.get(name)
        if raw is None or raw == "":
            return None
        try:
            value = int(raw)
        except ValueError:
            raise invalid(f"{name} must be a whole number, not {raw!r}") from None
        return in_range(name, value, least)

    def whole(self, name: str, default: int, *, least: int = 0) -> int:
        value = self.opt_whole(name, least=least)
        return default if value is None else value

    def seconds(self, name: str, default: float) -> float:
        raw = self.query.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = float(raw)
        except ValueError:
            raise invalid(f"{name} must be a number of seconds, not {raw!r}") from None
        return check_seconds(value, name)


SMALL_BODY = 16 * 1024  # a write whose body is at most this is encoded on the event loop


ROUTE = "_ys_route"  # the attribute `route` marks a handler with
H = TypeVar("H", bound=Callable[..., Any])


def route(method: str, path: str) -> Callable[[H], H]:
    """Mark a route group's method as the handler of `method path` (see `routes_of`)."""

    def mark(handler: H) -> H:
        setattr(handler, ROUTE, (method, path))
        return handler

    return mark


def routes_of(group: object) -> list[web.RouteDef]:
    """The routes a group's marked handlers serve, in the order they are written (a GET
    answers HEAD too, as aiohttp's web.get does)."""
    out = []
    for name, fn in vars(type(group)).items():
        spec = getattr(fn, ROUTE, None)
        if spec is not None:
            method, path = spec
            handler = getattr(group, name)
            out.append(
                web.get(path, handler) if method == "GET" else web.route(method, path, handler)
            )
    return out


async def write(
    hub: Hub,
    request: web.Request,
    small: Callable[P, Awaitable[T]],
    big: Callable[P, T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """A store write (admit, acknowledge) for a request whose params or result the store
    encodes. A small body is encoded here and the write awaited (`small`, the `_async`
    one): the group writer commits it with the other writes of its batch and answers this
    loop once per batch, no thread hand-off. A big one is encoded in the thread pool
    (`big`): encoding 64 KiB takes tens of ms, which would hold up every other request on
    the loop."""
    if len(await request.read()) <= SMALL_BODY:  # the body as read (and inflated)
        return await small(*args, **kwargs)
    return await hub.call(big, *args, **kwargs)


def delivery_token(request: web.Request) -> str:
    """The delivery token; checked after the body (a malformed body is refused first)."""
    token = request.headers.get("X-Ys-Token")
    if not token:
        raise InvalidArgument("INVALID_ARGUMENT", "this route needs the X-Ys-Token header")
    return token
