"""The worker's routes: a delivery reads its state, saves steps, starts children, renews its
lease and reports its outcome. All but the start are fenced by the delivery token
(X-Ys-Token)."""

from __future__ import annotations

from aiohttp import web

from ys.daemon import views
from ys.daemon.api_base import ApiBase, _json, invalid
from ys.daemon.api_requests import Outcome, SaveStep, Start


class WorkerRoutes(ApiBase):
    """The worker's calls (fenced by the delivery token)."""

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
        req = await SaveStep.read(request)
        execution_id = request.match_info["id"]
        # Awaited on the loop whatever its size: the value is already canonical text (the
        # worker encoded it), so there is nothing to encode here.
        cancel = await self.d.store.save_step_async(
            execution_id, self._token(request), request.match_info["key"],
            kind=req.kind, status=req.status, value=req.value, attempts=req.attempts,
            wake_at=req.wake_at,
        )
        if req.status == "waiting":
            self.d.dispatcher.mark_suspended(execution_id, self._token(request))
        self.d.dispatcher.stepped(execution_id, self._token(request))  # a cancel's grace restarts
        self.d.dispatcher.step_saved(execution_id, self._token(request), req.kind)
        self.d.hub.notify(execution_id)
        return _json({"cancel_requested": bool(cancel)})

    async def start(self, request: web.Request) -> web.Response:
        """RFC 003's start client: idempotent by (caller, step key), not fenced."""
        req = await Start.read(request)
        caller = request.match_info["id"]
        target = await self.call(
            self.d.store.start, caller, request.match_info["key"], req.workflow, req.params,
            detached=req.detached,
        )
        self.d.hub.notify(target)
        self.d.dispatcher.poke()
        return _json({"execution_id": target})

    async def outcome(self, request: web.Request) -> web.Response:
        req = await Outcome.read(request)
        execution_id = request.match_info["id"]
        token = self._token(request)
        if req.outcome is None:
            raise invalid("outcome is required (an object: {\"status\": ...})")
        self.d.dispatcher.flush_output(execution_id, token)  # its log is whole before the outcome
        on_failure = None
        status = str(req.outcome.get("status"))
        first = self.d.dispatcher.delivering(execution_id, token)
        if status == "failed":
            record = await self.call(self.d.store.get, execution_id)
            on_failure = self.d.handler_for(record.workflow) if record is not None else None
        result = await self.write(request, "acknowledge", execution_id, token, req.outcome,
                                  on_failure=on_failure)
        from ys.sdk import crash_point

        crash_point("outcome.after_commit")  # a failure and its handler are committed together
        if on_failure is not None and first and result.get("status") == "failed":
            self.d.metrics.admissions.labels("on_failure").inc()
        self.d.dispatcher.acknowledged(execution_id, token, str(result.get("status", status)))
        self.d.hub.notify(execution_id, may_end=True)
        self.d.dispatcher.poke()
        return _json(result)

    async def renew(self, request: web.Request) -> web.Response:
        execution_id = request.match_info["id"]
        token = self._token(request)
        expires = await self.d.store.renew_async(
            execution_id, token, lease_seconds=self.d.dispatcher.lease_seconds,
        )
        self.d.dispatcher.renewed(execution_id, token, expires)
        return _json({"lease_expires_at": views.iso(expires)})
