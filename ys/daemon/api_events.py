"""`GET /v1/events`: every event of every execution in commit order, after a cursor; a long
poll when there is nothing new yet (`ys history --follow --all`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from ys.daemon import views
from ys.daemon.api_base import Query, _json, route
from ys.daemon.api_requests import MAX_WAIT
from ys.daemon.shapes import StreamEventJson
from ys.errors import DaemonUnavailable
from ys.store.protocols import StreamEvent

if TYPE_CHECKING:
    from ys.daemon.parts import DaemonParts

RECHECK = 0.5  # a commit that notified nobody (a schedule's fire) is seen within this


@dataclass(frozen=True)
class EventsQuery:
    cursor: str | None  # resume after this position
    since: float | None  # else from this many seconds ago; neither: from now
    limit: int
    wait: float  # seconds to wait for an event when there is none yet

    @classmethod
    def read(cls, request: web.Request) -> EventsQuery:
        q = Query(request)
        since = q.seconds("since", -1.0)
        return cls(
            q.text("cursor"),
            since if since >= 0 else None,
            min(1000, q.whole("limit", 1000, least=1)),
            min(MAX_WAIT, q.seconds("wait", 0)),
        )


@dataclass(frozen=True)
class EventRoutes:
    """The event stream."""

    d: DaemonParts  # the Daemon: store, registry, dispatcher, hub, paths

    @route("GET", "/v1/events")
    async def events(self, request: web.Request) -> web.Response:
        q = EventsQuery.read(request)
        store = self.d.store
        since = None if q.since is None else max(0.0, store.clock() - q.since)
        items, cursor = await self.d.hub.call(
            store.event_stream, q.cursor, since=since, limit=q.limit
        )
        deadline = time.monotonic() + q.wait
        while not items and q.wait > 0:
            if self.d.hub.stopping:
                raise DaemonUnavailable(
                    "DAEMON_UNAVAILABLE",
                    "the daemon is stopping; start it with `ys daemon start` and follow again",
                )
            ev = self.d.hub.watch_any()  # before the read: a change in between is not missed
            items, cursor = await self.d.hub.call(store.event_stream, cursor, limit=q.limit)
            left = deadline - time.monotonic()
            if items or left <= 0:
                break
            await self.d.hub.wait(ev, min(left, RECHECK))
        return _json({"events": [event(e) for e in items], "cursor": cursor})


def event(e: StreamEvent) -> StreamEventJson:
    """One event of the stream: the history's shape, with its execution and its cursor."""
    return {
        "execution_id": e.execution_id,
        "workflow": e.workflow,
        **views.history_event(e.seq, e.event),
        "cursor": str(e.pos),
    }
