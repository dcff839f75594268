"""The API on the Unix socket: HTTP/1.1 + JSON (aiohttp). Every route is in docs/API.md.

Errors are {"code", "message"} with the spec's codes and the HTTP status errors.py maps them
to. Worker routes take the delivery token in the X-Ys-Token header and are fenced by it.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ys import __version__
from ys.daemon import views
from ys.errors import InvalidArgument, NotFound, YsError

log = logging.getLogger("ys.api")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_BODY = 3 * 1024 * 1024  # params are at most 2 MiB encoded, plus the envelope
MAX_WAIT = 60.0


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(data, separators=(",", ":"), ensure_ascii=False),
        status=status, content_type="application/json",
    )


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
        return _json({"code": "PERMISSION_DENIED",
                      "message": "this daemon serves only its own user"}, 403)
    try:
        return await handler(request)
    except YsError as exc:
        return _json(exc.to_json(), exc.http_status)
    except web.HTTPException as exc:
        if exc.status >= 400:
            code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "INVALID_ARGUMENT"}.get(
                exc.status, "INVALID_ARGUMENT")
            return _json({"code": code, "message": f"{request.method} {request.path}: {exc.reason}"},
                         exc.status)
        raise
    except Exception as exc:
        log.exception("internal error on %s %s", request.method, request.path)
        return _json({"code": "INTERNAL", "message": f"internal error: {exc}"}, 500)


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


class Api:
    def __init__(self, daemon: Any) -> None:
        self.d = daemon  # the Daemon: store, registry, dispatcher, hub, paths

    def routes(self) -> list[web.RouteDef]:
        e = "/v1/executions/{id}"
        return [
            web.get("/v1/version", self.version),
            web.post("/v1/shutdown", self.shutdown),
            web.get("/v1/workflows", self.workflows),
            web.post("/v1/executions", self.trigger),
            web.get("/v1/executions", self.list),
            web.get(e, self.get),
            web.get(e + "/describe", self.describe),
            web.get(e + "/history", self.history),
            web.get(e + "/wait", self.wait),
            web.post(e + "/wake", self.wake),
            web.post(e + "/cancel", self.cancel),
            web.get(e + "/run", self.run_state),
            web.put(e + "/steps/{key}", self.save_step),
            web.post(e + "/starts/{key}", self.start),
            web.post(e + "/outcome", self.outcome),
            web.post(e + "/lease", self.renew),
            web.get("/v1/store", self.store_list),
            web.get("/v1/store/{key}", self.store_get),
            web.put("/v1/store/{key}", self.store_put),
            web.delete("/v1/store/{key}", self.store_delete),
            web.post("/v1/store/{key}/wait", self.store_wait),
            web.get("/v1/schedules", self.schedules),
            web.post("/v1/schedules", self.schedule_add),
            web.get("/v1/schedules/{name}", self.schedule),
            web.delete("/v1/schedules/{name}", self.schedule_remove),
            web.post("/v1/schedules/{name}/pause", self.schedule_pause),
            web.post("/v1/schedules/{name}/resume", self.schedule_resume),
            web.get("/v1/schedules/{name}/next", self.schedule_next),
            web.post("/v1/gc", self.gc),
            web.get("/v1/effects", self.effects),
            web.get("/v1/effects/{effect_id}", self.effect),
            web.post("/v1/effects/{effect_id}/begin", self.effect_begin),
            web.post("/v1/effects/{effect_id}/settle", self.effect_settle),
            web.post("/v1/effects/{effect_id}/wait", self.effect_wait),
        ]

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await self.d.hub.call(fn, *args, **kwargs)

    def _token(self, request: web.Request) -> str:
        token = request.headers.get("X-Ys-Token")
        if not token:
            raise InvalidArgument("INVALID_ARGUMENT", "this route needs the X-Ys-Token header")
        return token

    # -- daemon -----------------------------------------------------------------------------

    async def version(self, request: web.Request) -> web.Response:
        p = self.d.paths
        return _json({
            "version": __version__, "pid": os.getpid(), "started_at": views.iso(self.d.started_at),
            "uptime_seconds": round(time.time() - self.d.started_at, 3),
            "concurrency": self.d.dispatcher.concurrency, "running": len(self.d.dispatcher.running),
            "paths": {"db": str(p.db), "workflows": str(p.workflows), "socket": str(p.socket),
                      "logs": str(p.logs)},
        })

    async def shutdown(self, request: web.Request) -> web.Response:
        self.d.request_stop()
        return _json({"stopping": True, "pid": os.getpid()})

    async def workflows(self, request: web.Request) -> web.Response:
        items = sorted(self.d.registry.workflows.values(), key=lambda w: w.name)
        return _json({"workflows": [w.to_json() for w in items]})

    # -- executions -------------------------------------------------------------------------

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

    async def trigger(self, request: web.Request) -> web.Response:
        body = await _body(request)
        workflow = body.get("workflow")
        if not isinstance(workflow, str):
            raise InvalidArgument("INVALID_ARGUMENT", "workflow is required")
        from ys.store.base import check_workflow_name

        check_workflow_name(workflow)
        await self.known_workflow(workflow)
        result = await self.call(
            self.d.store.admit, workflow, body.get("params"),
            context=body.get("context"), execution_id=body.get("execution_id"),
            if_exists=body.get("if_exists", "fail"),
        )
        if result.started:
            self.d.dispatcher.poke()
        return _json({"execution_id": result.execution_id, "started": result.started},
                     201 if result.started else 200)

    async def list(self, request: web.Request) -> web.Response:
        statuses = request.query.getall("status", [])
        page = await self.call(
            self.d.store.list, statuses=statuses or None,
            workflow=request.query.get("workflow") or None,
            parent=request.query.get("parent") or None,
            limit=_int(request, "limit", 100), page_token=request.query.get("page_token") or None,
        )
        return _json({"executions": [self._record(r) for r in page.items],
                      "next_page_token": page.next_page_token})

    def _record(self, r: Any) -> dict[str, Any]:
        out = views.record(r)
        running = self.d.dispatcher.running.get(r.execution_id)
        if running is not None and r.status == "running":
            out["lease_holder"] = f"pid {running.proc.pid}" if running.proc else "starting"
        return out

    async def _load(self, execution_id: str) -> Any:
        record = await self.call(self.d.store.get, execution_id)
        if record is None:
            raise NotFound("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
        return record

    async def get(self, request: web.Request) -> web.Response:
        return _json(self._record(await self._load(request.match_info["id"])))

    async def describe(self, request: web.Request) -> web.Response:
        execution_id = request.match_info["id"]
        d = await self.call(self.d.store.describe, execution_id)
        out = views.describe(d)
        out["effects"] = [views.effect(e) for e in
                          await self.call(self.d.store.effects, None, execution_id)]
        out["waiting_on"] = [
            {**w, **({"since": views.iso(w["since"])} if "since" in w else {}),
             **({"wake_at": views.iso(w["wake_at"])} if "wake_at" in w else {})}
            for w in await self.call(self.d.store.waits, execution_id)
        ]
        return _json(out)

    async def history(self, request: web.Request) -> web.Response:
        page = await self.call(
            self.d.store.history, request.match_info["id"], _int(request, "limit", 100),
            request.query.get("page_token") or None,
        )
        return _json({"events": [views.event(e) for e in page.items],
                      "next_page_token": page.next_page_token})

    async def wait(self, request: web.Request) -> web.Response:
        """Long poll: returns when the execution is terminal, or (with `after=N`) once its
        history is longer than N events, or when `timeout` seconds pass."""
        execution_id = request.match_info["id"]
        timeout = min(MAX_WAIT, max(0.0, _float(request, "timeout", 30.0)))
        after = request.query.get("after")
        after_n = int(after) if after and after.isdigit() else None
        deadline = time.monotonic() + timeout
        while True:
            ev = self.d.hub.watch(execution_id)
            record = await self._load(execution_id)
            if record.terminal or (after_n is not None and record.history_length > after_n):
                break
            left = deadline - time.monotonic()
            if left <= 0 or not await self.d.hub.wait(ev, left):
                break
        out = self._record(record)
        out["history_length"] = record.history_length
        return _json(out)

    async def wake(self, request: web.Request) -> web.Response:
        status = await self.call(self.d.store.request_wake, request.match_info["id"])
        self.d.dispatcher.poke()
        return _json({"status": status})

    async def cancel(self, request: web.Request) -> web.Response:
        execution_id = request.match_info["id"]
        changed = await self.call(self.d.store.cancel, execution_id)
        record = await self._load(execution_id)
        self.d.hub.notify(execution_id)
        self.d.dispatcher.poke()
        out = self._record(record)
        out["changed"] = changed
        return _json(out)

    # -- the worker's calls (fenced by the delivery token) ----------------------------------

    async def run_state(self, request: web.Request) -> web.Response:
        execution_id = request.match_info["id"]
        record, steps = await self.call(
            self.d.store.delivery_state, execution_id, self._token(request)
        )
        return _json({
            "record": views.record(record) | {"params": None},
            "params": record.params_json,
            "steps": [
                {"key": s.key, "kind": s.kind, "status": s.status, "value": s.value,
                 "attempts": s.attempts, "wake_at": s.wake_at}
                for s in steps
            ],
            "lease_seconds": self.d.dispatcher.lease_seconds,
        })

    async def save_step(self, request: web.Request) -> web.Response:
        execution_id = request.match_info["id"]
        body = await _body(request)
        value = body.get("value")
        if value is not None and not isinstance(value, str):
            raise InvalidArgument("INVALID_ARGUMENT", "value must be canonical JSON text or null")
        cancel = await self.call(
            self.d.store.save_step, execution_id, self._token(request), request.match_info["key"],
            kind=str(body.get("kind", "run")), status=str(body.get("status", "completed")),
            value=value, attempts=int(body.get("attempts", 1)), wake_at=body.get("wake_at"),
        )
        if body.get("status") == "waiting":
            self.d.dispatcher.mark_suspended(execution_id, self._token(request))
        self.d.hub.notify(execution_id)
        return _json({"cancel_requested": bool(cancel)})

    async def start(self, request: web.Request) -> web.Response:
        """RFC 003's start client: idempotent by (caller, step key), not fenced."""
        caller = request.match_info["id"]
        body = await _body(request)
        target = await self.call(
            self.d.store.start, caller, request.match_info["key"], body.get("workflow"),
            body.get("params"), detached=bool(body.get("detached", False)),
        )
        self.d.hub.notify(target)
        self.d.dispatcher.poke()
        return _json({"execution_id": target})

    async def outcome(self, request: web.Request) -> web.Response:
        execution_id = request.match_info["id"]
        token = self._token(request)
        body = await _body(request)
        result = await self.call(
            self.d.store.acknowledge, execution_id, token, body.get("outcome") or {}
        )
        self.d.dispatcher.acknowledged(execution_id, token)
        self.d.hub.notify(execution_id)
        self.d.dispatcher.poke()
        return _json(result)

    # -- schedules and housekeeping ----------------------------------------------------------

    async def schedules(self, request: web.Request) -> web.Response:
        items = await self.call(self.d.store.schedules)
        return _json({"schedules": [views.schedule(s) for s in items]})

    async def schedule(self, request: web.Request) -> web.Response:
        s = await self.call(self.d.store.schedule, request.match_info["name"])
        return _json(views.schedule(s))

    async def schedule_add(self, request: web.Request) -> web.Response:
        body = await _body(request)
        workflow = _text(body, "workflow")
        from ys.store.base import check_workflow_name

        check_workflow_name(workflow)
        await self.known_workflow(workflow)
        max_late = body.get("max_late")
        s = await self.call(
            self.d.store.schedule_add, _text(body, "name"), workflow, _text(body, "cron"),
            tz=str(body.get("tz") or "local"), params=body.get("params"),
            catch_up=str(body.get("catch_up") or "once"),
            overlap=str(body.get("overlap") or "skip"),
            max_late=float(max_late) if isinstance(max_late, int | float) else None,
            jitter=float(body.get("jitter") or 0.0),
        )
        self.d.scheduler.poke()
        return _json(views.schedule(s), 201)

    async def schedule_remove(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        await self.call(self.d.store.schedule_remove, name)
        return _json({"name": name, "removed": True})

    async def schedule_pause(self, request: web.Request) -> web.Response:
        s = await self.call(self.d.store.schedule_pause, request.match_info["name"], True)
        return _json(views.schedule(s))

    async def schedule_resume(self, request: web.Request) -> web.Response:
        s = await self.call(self.d.store.schedule_pause, request.match_info["name"], False)
        self.d.scheduler.poke()
        return _json(views.schedule(s))

    async def schedule_next(self, request: web.Request) -> web.Response:
        from ys import cron

        s = await self.call(self.d.store.schedule, request.match_info["name"])
        n = max(1, min(1000, _int(request, "n", 5)))
        after = max(time.time(), s["cursor"])
        off = cron.jitter_offset(s["name"], s["jitter"])
        times = [t + off for t in cron.slots_after(s["cron"], s["tz"], after, n)]
        return _json({"fire_times": [views.iso(t) for t in times]})

    async def gc(self, request: web.Request) -> web.Response:
        body = await _body(request)
        older = body.get("older_than")
        if older is not None and (not isinstance(older, int | float) or older < 0):
            raise InvalidArgument("INVALID_ARGUMENT", "older_than must be seconds >= 0")
        from ys.daemon.scheduler import retention_seconds

        ids = await self.d.scheduler.gc(float(older) if older is not None else
                                        retention_seconds(), bool(body.get("dry_run")))
        return _json({"pruned": ids, "count": len(ids), "dry_run": bool(body.get("dry_run"))})

    # -- durable values ----------------------------------------------------------------------

    async def store_list(self, request: web.Request) -> web.Response:
        items = await self.call(self.d.store.store_list, request.query.get("prefix", ""))
        return _json({"entries": [
            {"key": e["key"], "version": e["version"], "updated_at": views.iso(e["updated_at"])}
            for e in items
        ]})

    async def store_get(self, request: web.Request) -> web.Response:
        key = request.match_info["key"]
        found = await self.call(self.d.store.store_get, key)
        if found is None:
            raise NotFound("NOT_FOUND", f"no value stored under {key!r}")
        return _json({"key": key, "value": views.plain(found["value"]),
                      "version": found["version"], "updated_at": views.iso(found["updated_at"])})

    async def store_put(self, request: web.Request) -> web.Response:
        body = await _body(request)
        if "value" not in body:
            raise InvalidArgument("INVALID_ARGUMENT", "value is required")
        expected = body.get("expected_version")
        if expected is not None and (not isinstance(expected, int) or isinstance(expected, bool)
                                     or expected < 0):
            raise InvalidArgument("INVALID_ARGUMENT", "expected_version must be a whole number")
        out = await self.call(self.d.store.store_put, request.match_info["key"], body["value"],
                              expected)
        if out.get("woken"):
            self.d.dispatcher.poke()
        return _json({"key": out["key"], "version": out["version"],
                      "updated_at": views.iso(out["updated_at"]), "woken": out["woken"]})

    async def store_delete(self, request: web.Request) -> web.Response:
        key = request.match_info["key"]
        deleted = await self.call(self.d.store.store_delete, key)
        if not deleted:
            raise NotFound("NOT_FOUND", f"no value stored under {key!r}")
        return _json({"key": key, "deleted": True})

    async def store_wait(self, request: web.Request) -> web.Response:
        body = await _body(request)
        timeout_at = body.get("timeout_at")
        found = await self.call(
            self.d.store.store_wait, request.match_info["key"], _text(body, "execution_id"),
            _text(body, "step_key"), int(body.get("seen") or 0),
            float(timeout_at) if isinstance(timeout_at, int | float) else None,
        )
        return _json({"found": found})

    # -- effects (RFC 004): not fenced -------------------------------------------------------

    async def effects(self, request: web.Request) -> web.Response:
        status = request.query.get("status") or None
        if status not in (None, "pending", "settled", "conflict"):
            raise InvalidArgument("INVALID_ARGUMENT",
                                  "status must be pending, settled or conflict")
        items = await self.call(self.d.store.effects, status,
                                request.query.get("execution") or None)
        return _json({"effects": [views.effect(e) for e in items]})

    async def effect(self, request: web.Request) -> web.Response:
        effect_id = request.match_info["effect_id"]
        found = await self.call(self.d.store.effect, effect_id)
        if found is None:
            raise NotFound("NOT_FOUND", f"no effect {effect_id!r}")
        return _json(views.effect(found))

    async def effect_begin(self, request: web.Request) -> web.Response:
        body = await _body(request)
        state = await self.call(
            self.d.store.effect_begin, body.get("operation"), request.match_info["effect_id"],
            body.get("input"), _text(body, "execution_id"), _text(body, "step_key"),
        )
        return _json(state)

    async def effect_settle(self, request: web.Request) -> web.Response:
        body = await _body(request)
        try:
            state = await self.call(
                self.d.store.effect_settle, _text(body, "operation"),
                request.match_info["effect_id"], _text(body, "result"),
            )
        except ValueError as exc:
            raise InvalidArgument("INVALID_ARGUMENT", f"result is not canonical: {exc}") from None
        self.d.dispatcher.poke()  # settlement wakes every waiter
        return _json(state)

    async def effect_wait(self, request: web.Request) -> web.Response:
        body = await _body(request)
        wake_at = body.get("wake_at")
        if not isinstance(wake_at, int | float):
            raise InvalidArgument("INVALID_ARGUMENT", "wake_at (epoch seconds) is required")
        first = await self.call(
            self.d.store.effect_wait, request.match_info["effect_id"],
            _text(body, "execution_id"), _text(body, "step_key"), float(wake_at),
        )
        self.d.dispatcher.poke()
        return _json({"wake_at": first})

    async def renew(self, request: web.Request) -> web.Response:
        execution_id = request.match_info["id"]
        token = self._token(request)
        expires = await self.call(
            self.d.store.renew, execution_id, token,
            lease_seconds=self.d.dispatcher.lease_seconds,
        )
        self.d.dispatcher.renewed(execution_id, token, expires)
        return _json({"lease_expires_at": views.iso(expires)})


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str):
        raise InvalidArgument("INVALID_ARGUMENT", f"{name} is required (text)")
    return value


def make_app(api: Api) -> web.Application:
    app = web.Application(middlewares=[errors_middleware], client_max_size=MAX_BODY)
    app.add_routes(api.routes())
    return app
