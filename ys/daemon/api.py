"""The API on the Unix socket: HTTP/1.1 + JSON (aiohttp). Every route is in docs/API.md.

Errors are {"code", "message"} with the spec's codes and the HTTP status errors.py maps them
to. Worker routes take the delivery token in the X-Ys-Token header and are fenced by it.

Here: the middleware, the daemon and execution routes (`DaemonRoutes`), and `Api`, which
builds every group of routes with the daemon's parts and collects `routes()`, the one list of
every route. The other groups: the worker's calls (api_worker), durable values (api_values),
schedules and gc (api_schedules), effects (api_effects), the event stream (api_events) and the
dashboard's overview and tokens (api_ui); the helpers they share are in api_base. What an
operator asks (cancel, wake, retry, schedule pause and resume) is done by
ys.daemon.operations, which the dashboard's buttons call too. The dashboard's pages (/ui/) are
mounted on the app by ys.daemon.main (ys.ui.server).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ys import __version__
from ys.daemon import operations, views
from ys.daemon.api_base import SMALL_BODY, Query, _json, route, routes_of, write
from ys.daemon.api_effects import EffectRoutes
from ys.daemon.api_events import EventRoutes
from ys.daemon.api_requests import HistoryQuery, ListQuery, RetryRequest, Trigger, WaitQuery
from ys.daemon.api_schedules import ScheduleRoutes
from ys.daemon.api_ui import Mint, UiRoutes
from ys.daemon.api_values import ValueRoutes
from ys.daemon.api_worker import WorkerRoutes
from ys.daemon.delivering import Deliveries
from ys.daemon.http import (
    SETTINGS,
    HttpSettings,
    expect_handler,
    too_large,
    within_limits,
)
from ys.daemon.shapes import RecordJson, TriggeredJson
from ys.errors import DaemonUnavailable, YsError
from ys.store.protocols import Admission, ConcurrencyWait

if TYPE_CHECKING:
    from ys.daemon.parts import DaemonParts

log = logging.getLogger("ys.api")
# `waiting_for` of a due execution a claim passed over: its workflow's concurrency limit is
# reached (for its value of the limit's key); it runs when a slot frees
WAITING_FOR_SLOT = "a concurrency slot"
# ... or its workflow is paused (`ys workflows pause`): no claim takes it until resumed
WAITING_PAUSED = "workflow paused"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def peer_uid(request: web.Request) -> int | None:
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    uid = peer_uid(request)
    if uid != os.getuid():
        log.warning("refused a connection from uid %s", uid)
        return _json(
            {"code": "PERMISSION_DENIED", "message": "this daemon serves only its own user"}, 403
        )
    if request.method == "CONNECT":
        return no_tunnel(request)
    try:
        return await within_limits(request, handler)  # the body's size limit and read timeout
    except YsError as exc:
        return _json(exc.to_json(), exc.http_status)
    except web.HTTPException as exc:
        if exc.status == 413:
            return too_large(request, request.app[SETTINGS].max_body)
        if exc.status >= 400:
            code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status, "INVALID_ARGUMENT")
            return _json(
                {"code": code, "message": f"{request.method} {request.path}: {exc.reason}"},
                exc.status,
            )
        raise
    except Exception as exc:
        log.exception("internal error on %s %s", request.method, request.path)
        return _json({"code": "INTERNAL", "message": f"internal error: {exc}"}, 500)


def no_tunnel(request: web.Request) -> web.Response:
    """CONNECT asks for a tunnel, which the daemon never opens: 405 in the API's error form,
    and the connection closed (aiohttp would read what follows as the tunnel's bytes)."""
    response = _json(
        {
            "code": "METHOD_NOT_ALLOWED",
            "message": "CONNECT is not served (the daemon opens no tunnels); send GET or POST "
            "to a route docs/API.md lists",
        },
        405,
    )
    response.headers["Allow"] = "GET, POST, PUT, DELETE"
    response.force_close()
    return response


class Api:
    """Every route of the API, collected from its groups: each an object built with the
    daemon's parts (and the delivery service the worker's channel shares)."""

    def __init__(
        self,
        d: DaemonParts,
        deliveries: Deliveries | None = None,
        mint: Mint | None = None,
    ) -> None:
        deliveries = deliveries or Deliveries(d)
        self.groups: list[object] = [
            DaemonRoutes(d),
            WorkerRoutes(d, deliveries),
            ValueRoutes(d, deliveries),
            ScheduleRoutes(d),
            EffectRoutes(d, deliveries),
            EventRoutes(d),
            UiRoutes(d, mint),
        ]

    def routes(self) -> list[web.RouteDef]:
        return [r for g in self.groups for r in routes_of(g)]


@dataclass(frozen=True)
class DaemonRoutes:
    """The daemon's own routes and the executions'."""

    d: DaemonParts  # the Daemon: store, registry, dispatcher, hub, paths

    # -- daemon -----------------------------------------------------------------------------

    @route("GET", "/v1/version")
    async def version(self, request: web.Request) -> web.Response:
        p = self.d.paths
        return _json(
            {
                "version": __version__,
                "pid": os.getpid(),
                "started_at": views.iso(self.d.started_at),
                "uptime_seconds": round(time.time() - self.d.started_at, 3),
                "concurrency": self.d.dispatcher.concurrency,
                "running": len(self.d.dispatcher.running),
                "daemon_id": self.d.daemon_id,
                "database": {
                    "kind": "postgresql" if self.d.settings.postgres else "sqlite",
                    "location": self.d.settings.database_shown(p.db),
                    "reachable": self.d.store.database_up(),
                },
                "tracing": self.d.tracing_status(),
                "memory_limit": self.d.dispatcher.memory.choice.to_json(),
                # the tuning values in force (ys.settings), read once at start
                "settings": self.d.settings.tuning(),
                "paths": {
                    # the database in use: on PostgreSQL its URL without a password, not
                    # the SQLite file it does not use
                    "db": self.d.settings.database_shown(p.db),
                    "workflows": str(p.workflows),
                    "socket": str(p.socket),
                    "logs": str(p.logs),
                },
            }
        )

    @route("POST", "/v1/shutdown")
    async def shutdown(self, request: web.Request) -> web.Response:
        self.d.request_stop()
        return _json({"stopping": True, "pid": os.getpid()})

    @route("GET", "/v1/workflows")
    async def workflows(self, request: web.Request) -> web.Response:
        stale = await self.d.hub.call(self.d.store.stale_scripts)
        pauses = await self.d.hub.call(self.d.store.workflow_pauses)
        return _json(
            {
                "workflows": [
                    w.to_json()
                    | {
                        "older_live": stale.get(w.name, 0),
                        "warning": self.d.handler_warning(w),
                        "paused": w.name in pauses,
                    }
                    for w in self.d.registry.listing()
                ]
            }
        )

    @route("GET", "/v1/metrics")
    async def metrics(self, request: web.Request) -> web.Response:
        """This daemon's figures and the database's (read off the loop, then rendered)."""
        shared = None  # while the database cannot be reached: this daemon's own figures
        if self.d.store.database_up():
            with contextlib.suppress(DaemonUnavailable):
                shared = await self.d.hub.call(self.d.store.shared_counts)
        body = self.d.metrics.render(shared, self.d.store.clock())
        return web.Response(body=body, headers={"Content-Type": self.d.metrics.content_type})

    # -- executions -------------------------------------------------------------------------

    @route("POST", "/v1/executions")
    async def trigger(self, request: web.Request) -> web.Response:
        req = await Trigger.read(request)
        await operations.known_workflow(self.d, req.workflow)
        store, dispatcher = self.d.store, self.d.dispatcher
        # A small request admitted while a slot is free is claimed in its admission's
        # transaction: its worker starts as soon as that commits.
        lease = None
        now = time.time()
        due_at = req.due(now)
        later = due_at is not None and due_at > now
        if not later and len(await request.read()) <= SMALL_BODY:  # due later: not claimed now
            lease = dispatcher.reserve(req.workflow)
        if lease is None:
            result = await write(
                self.d.hub,
                request,
                store.admit_async,
                store.admit,
                req.workflow,
                req.params,
                context=req.context,
                execution_id=req.execution_id,
                if_exists=req.if_exists,
                tags=req.tags or None,
                due_at=due_at,
            )
        else:
            result = Admission(req.execution_id or "", False)
            try:
                result = await store.admit_async(
                    req.workflow,
                    req.params,
                    context=req.context,
                    execution_id=req.execution_id,
                    if_exists=req.if_exists,
                    tags=req.tags or None,
                    lease_seconds=lease,
                    due_at=due_at,
                )
            finally:
                dispatcher.admitted(result.delivery)
        out: TriggeredJson = {"execution_id": result.execution_id, "started": result.started}
        if result.started:
            self.d.metrics.admissions.labels("trigger").inc()
            if result.delivery is None:
                # One claimed in its admission's transaction runs already and made nothing
                # else due: a claim round now would find nothing (docs/design.md, The store)
                dispatcher.poke()
            wf = await self.d.registry.current(req.workflow)
            if wf is not None and wf.error:  # admitted all the same: it waits for the fix
                out["warning"] = (
                    f"workflow {req.workflow} cannot run until its script is fixed; "
                    f"the execution waits: {wf.error}"
                )
        return _json(out, 201 if result.started else 200)

    @route("GET", "/v1/executions")
    async def list(self, request: web.Request) -> web.Response:
        q = ListQuery.read(request)
        now = self.d.store.clock()
        page = await self.d.hub.call(
            self.d.store.list,
            statuses=q.statuses or None,
            workflow=q.workflow,
            parent=q.parent,
            limit=q.limit,
            page_token=q.page_token,
            tags=q.tags or None,
            since=None if q.since is None else max(0.0, now - q.since),
            until=None if q.until is None else max(0.0, now - q.until),
        )
        holders = await self._holders(page.items)
        waits = await self._waits(page.items)
        return _json(
            {
                "executions": [self._record(r, holders, waits) for r in page.items],
                "next_page_token": page.next_page_token,
            }
        )

    def _record(
        self,
        r: Any,
        holders: dict[str, str] | None = None,
        waits: dict[str, str] | None = None,
    ) -> RecordJson:
        out = views.record(r)
        holder = self._holder(r, holders)
        if holder is not None:
            out["lease_holder"] = holder
        if waits and r.execution_id in waits:
            out["waiting_for"] = waits[r.execution_id]
        return out

    async def _waits(self, records: Sequence[Any]) -> dict[str, str]:
        """What each of these unleased executions waits for, by execution ID: a concurrency
        slot (a claim passed it over), or its script (broken or missing)."""
        ids = [
            r.execution_id
            for r in records
            if r.status in ("admitted", "suspended") and r.due_at is not None
        ]
        if not ids:
            return {}
        store, registry = self.d.store, self.d.registry
        out = {i: WAITING_FOR_SLOT for i in await self.d.hub.call(store.slot_waits, ids)}
        workflows = {r.execution_id: r.workflow for r in records}
        for i, detail in (await self.d.hub.call(store.script_waits, ids)).items():
            out[i] = registry.waiting_for(workflows[i], detail)
        pauses = await self.d.hub.call(
            store.workflow_pauses
        )  # paused: nothing claims it, whatever else
        out.update({i: WAITING_PAUSED for i in ids if workflows[i] in pauses})
        return out

    def _holder(self, r: Any, holders: dict[str, str] | None) -> str | None:
        """Who runs a running execution: this daemon's worker ("pid N"; on a shared database
        "daemon ID, worker pid N"), or another daemon (`holders`, from the store)."""
        if r.status != "running":
            return None
        running = self.d.dispatcher.running.get(r.execution_id)
        if running is not None:
            pid = f"pid {running.proc.pid}" if running.proc else "starting"
            return f"daemon {self.d.daemon_id}, worker {pid}" if self.d.settings.postgres else pid
        return (holders or {}).get(r.execution_id)

    async def _holders(self, records: Sequence[Any]) -> dict[str, str]:
        """On a shared database, the daemons that hold the leases of running executions this
        daemon does not run, by execution ID ("daemon ID, daemon pid N")."""
        ids = [
            r.execution_id
            for r in records
            if r.status == "running" and r.execution_id not in self.d.dispatcher.running
        ]
        if not ids:
            return {}
        return dict(await self.d.hub.call(self.d.store.lease_holders, ids))

    async def load(self, execution_id: str) -> Any:
        return await operations.load(self.d, execution_id)

    @route("GET", "/v1/executions/{id}")
    async def get(self, request: web.Request) -> web.Response:
        record = await self.load(request.match_info["id"])
        waits = await self._waits([record])
        return _json(self._record(record, await self._holders([record]), waits))

    @route("GET", "/v1/executions/{id}/logs")
    async def logs(self, request: web.Request) -> web.Response:
        """The ends of the execution's delivery logs kept in the database (a shared one: each
        box keeps whole logs on its own disk), with the daemon that ran each delivery."""
        execution_id = request.match_info["id"]
        await self.load(execution_id)
        attempt = Query(request).opt_whole("attempt", least=1)  # one attempt's, or every one
        tails = await self.d.hub.call(self.d.store.log_tails, execution_id, attempt)
        return _json(
            {
                "execution_id": execution_id,
                "daemon_id": self.d.daemon_id,
                "shared": self.d.store.shared,  # whether log ends are kept here at all
                "logs": [
                    {
                        "attempt": t.attempt,
                        "daemon_id": t.daemon_id,
                        "path": t.path,
                        "size": t.size,
                        "kept": len(t.tail),
                        "truncated": t.size > len(t.tail),
                        "text": t.tail.decode("utf-8", "replace"),
                    }
                    for t in tails
                ],
            }
        )

    @route("GET", "/v1/executions/{id}/describe")
    async def describe(self, request: web.Request) -> web.Response:
        execution_id = request.match_info["id"]
        d = await self.d.hub.call(self.d.store.describe, execution_id)
        out = views.describe(d)
        holder = self._holder(d.record, await self._holders([d.record]))
        if holder is not None:
            out["lease_holder"] = holder
        # the script's version now, and whether it changed since this execution's admission
        wf = self.d.registry.get(d.record.workflow)
        now = wf.sha256 if wf is not None else None
        out["script_sha256_now"] = now
        out["script_changed"] = bool(
            d.record.script_sha256 and now and now != d.record.script_sha256
        )
        out["effects"] = [
            views.effect(e) for e in await self.d.hub.call(self.d.store.effects, None, execution_id)
        ]
        waiting_on = await self.d.hub.call(self.d.store.waits, execution_id)
        out["waiting_on"] = [views.wait(w) for w in waiting_on]
        if any(isinstance(w, ConcurrencyWait) for w in waiting_on):
            out["waiting_for"] = WAITING_FOR_SLOT
        waits = await self._waits([d.record])
        why = waits.get(d.record.execution_id)
        if why == WAITING_PAUSED or (why and "waiting_for" not in out):
            out["waiting_for"] = why
        return _json(out)

    @route("GET", "/v1/executions/{id}/timeline")
    async def timeline(self, request: web.Request) -> web.Response:
        from ys.daemon import timeline

        out = await self.d.hub.call(
            timeline.read, self.d.store, request.match_info["id"], time.time()
        )
        return _json(out)

    @route("GET", "/v1/executions/{id}/history")
    async def history(self, request: web.Request) -> web.Response:
        q = HistoryQuery.read(request)
        page = await self.d.hub.call(
            self.d.store.history,
            request.match_info["id"],
            q.limit,
            q.page_token,
        )
        return _json(
            {
                "events": [views.event(e) for e in page.items],
                "next_page_token": page.next_page_token,
            }
        )

    @route("GET", "/v1/executions/{id}/wait")
    async def wait(self, request: web.Request) -> web.Response:
        """Long poll: returns when the execution is terminal, or (with `after=N`) once its
        history is longer than N events, or when `timeout` seconds pass."""
        q = WaitQuery.read(request)
        execution_id = request.match_info["id"]
        after_n = q.after
        deadline = time.monotonic() + q.timeout
        while True:
            if self.d.hub.stopping:
                raise DaemonUnavailable(
                    "DAEMON_UNAVAILABLE",
                    "the daemon is stopping; start "
                    "it with `ys daemon start` and run the command again",
                )
            ev = self.d.hub.watch(execution_id, ends_only=after_n is None)
            record = await self.load(execution_id)
            if record.terminal or (after_n is not None and record.history_length > after_n):
                break
            left = deadline - time.monotonic()
            if left <= 0 or not await self.d.hub.wait(ev, left):
                break
        out = self._record(record)
        out["history_length"] = record.history_length
        return _json(out)

    @route("POST", "/v1/executions/{id}/wake")
    async def wake(self, request: web.Request) -> web.Response:
        return _json({"status": await operations.wake(self.d, request.match_info["id"])})

    @route("POST", "/v1/executions/{id}/cancel")
    async def cancel(self, request: web.Request) -> web.Response:
        at_once = request.query.get("now", "") in ("1", "true")
        done = await operations.cancel(self.d, request.match_info["id"], at_once=at_once)
        out = self._record(done.record)
        out["changed"] = done.changed
        return _json(out)

    @route("POST", "/v1/executions/{id}/retry")
    async def retry(self, request: web.Request) -> web.Response:
        """A new execution of a terminal one, replaying its steps before `from` (one store
        transaction); 201 with {"execution_id", "retry_of", "copied_steps"}."""
        req = await RetryRequest.read(request)
        result = await operations.retry(
            self.d,
            request.match_info["id"],
            new_id=req.new_id,
            from_step=req.from_step,
            params=req.params,
            again=req.again,
            if_status=req.if_status,
        )
        return _json(
            {
                "execution_id": result.execution_id,
                "retry_of": result.retry_of,
                "copied_steps": result.copied_steps,
                "started": result.started,
            },
            201 if result.started else 200,
        )


def make_app(api: Api, settings: HttpSettings | None = None) -> web.Application:
    settings = settings or HttpSettings()
    app = web.Application(middlewares=[errors_middleware], client_max_size=settings.max_body)
    app[SETTINGS] = settings
    app.add_routes(
        [  # each with the Expect handler that refuses in JSON
            web.RouteDef(
                r.method, r.path, r.handler, {**r.kwargs, "expect_handler": expect_handler}
            )
            for r in api.routes()
        ]
    )
    return app
