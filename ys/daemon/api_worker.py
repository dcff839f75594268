"""The worker's routes over HTTP: a delivery's state, its steps, its children, its lease and
its outcome; all but the start are fenced by the delivery token (X-Ys-Token). `ys step` in a
shell workflow uses them. A Python workflow's worker asks the same over its channel
(ys/daemon/channel.py), which shares these routes' logic (the `*_op` methods).
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from ys.contract import request_params
from ys.crashpoints import crash_point
from ys.daemon import views
from ys.daemon.api_base import ApiBase, _json, invalid
from ys.daemon.api_requests import Outcome, SaveStep, Start, StepDeadline

log = logging.getLogger("ys.api")


class WorkerRoutes(ApiBase):
    """The worker's calls (fenced by the delivery token)."""

    async def run_state(self, request: web.Request) -> web.Response:
        execution_id, token = request.match_info["id"], self._token(request)
        record, steps = await self.call(self.d.store.delivery_state, execution_id, token)
        key = request.query.get("step")
        if key is not None:  # `ys step` names the step it is about to take (fenced above)
            self.d.dispatcher.use_step_key(execution_id, token, key)
        return _json(
            {
                "record": views.record(record) | {"params": None},
                "params": record.params_json,
                "steps": [
                    {
                        "key": s.key,
                        "kind": s.kind,
                        "status": s.status,
                        "value": s.value,
                        "attempts": s.attempts,
                        "wake_at": s.wake_at,
                    }
                    for s in steps
                ],
                "lease_seconds": self.d.dispatcher.lease_seconds,
            }
        )

    async def save_step(self, request: web.Request) -> web.Response:
        req = await SaveStep.read(request)
        cancel = await self._save_step(
            request.match_info["id"], self._token(request), request.match_info["key"], req
        )
        return _json({"cancel_requested": cancel})

    async def step_deadline(self, request: web.Request) -> web.Response:
        """A worker announces the limit of one step attempt before its body runs: past it the
        dispatcher kills the worker and records the attempt (DESIGN.md §7). Fenced."""
        execution_id, token = request.match_info["id"], self._token(request)
        req = await StepDeadline.read(request)
        return _json(await self.deadline_op(execution_id, token, request.match_info["key"], req))

    async def deadline_op(
        self, execution_id: str, token: str, key: str, req: StepDeadline
    ) -> dict[str, Any]:
        await self.call(self.d.store.renew, execution_id, token)  # fenced: the live lease's
        self.d.dispatcher.step_deadline(
            execution_id, token, key, req.timeout, req.attempts, req.retry_delay
        )
        return {"ok": True}

    async def _save_step(self, execution_id: str, token: str, key: str, req: SaveStep) -> bool:
        # A step whose attempt the dispatcher killed for its timeout is recorded by the
        # dispatcher: a save that comes after the kill is refused (LEASE_LOST).
        self.d.dispatcher.step_ending(execution_id, token, key)
        # Awaited on the loop whatever its size: the value is already canonical text (the
        # worker encoded it), so there is nothing to encode here.
        cancel = await self.d.store.save_step_async(
            execution_id,
            token,
            key,
            kind=req.kind,
            status=req.status,
            value=req.value,
            attempts=req.attempts,
            wake_at=req.wake_at,
        )
        self.d.dispatcher.step_recorded(execution_id, token, req.kind, req.status)
        self.d.hub.notify(execution_id)
        return bool(cancel)

    async def start(self, request: web.Request) -> web.Response:
        """RFC 003's start client: idempotent by (caller, step key), not fenced."""
        req = await Start.read(request)
        return _json(await self.start_op(request.match_info["id"], request.match_info["key"], req))

    async def start_op(self, caller: str, key: str, req: Start) -> dict[str, Any]:
        # The worker sends params_json, encoded once on its side; another caller may send
        # params as an object, encoded once here. The store checks the text.
        params_json = req.params_json
        if params_json is None:
            params_json = request_params(req.params)
        await self.known_workflow(req.workflow)  # refused as `ys trigger` refuses the name
        target = await self.call(
            self.d.store.start, caller, key, req.workflow, params_json, detached=req.detached
        )
        self.d.hub.notify(target)
        self.d.dispatcher.poke()
        return {"execution_id": target}

    async def outcome(self, request: web.Request) -> web.Response:
        req = await Outcome.read(request)
        execution_id = request.match_info["id"]
        token = self._token(request)
        if req.outcome is None:
            raise invalid('outcome is required (an object: {"status": ...})')
        self.d.dispatcher.flush_output(execution_id, token)  # its log is whole before the outcome
        on_failure = None
        status = str(req.outcome.get("status"))
        first = self.d.dispatcher.delivering(execution_id, token)
        store = self.d.store
        if status == "failed":
            record = await self.call(store.get, execution_id)
            on_failure = self.d.handler_for(record.workflow) if record is not None else None
        result = await self.write(
            request,
            store.acknowledge_async,
            store.acknowledge,
            execution_id,
            token,
            req.outcome,
            on_failure=on_failure,
        )
        crash_point("outcome.after_commit")  # a failure and its handler are committed together
        if on_failure is not None and first and result.get("status") == "failed":
            self.d.metrics.admissions.labels("on_failure").inc()
        self.d.dispatcher.acknowledged(execution_id, token, str(result.get("status", status)))
        self.d.hub.notify(execution_id, may_end=True)
        self.d.dispatcher.poke()
        return _json(result)

    async def renew(self, request: web.Request) -> web.Response:
        return _json(await self.renew_op(request.match_info["id"], self._token(request)))

    async def renew_op(self, execution_id: str, token: str) -> dict[str, Any]:
        expires = await self.d.store.renew_async(
            execution_id,
            token,
            lease_seconds=self.d.dispatcher.lease_seconds,
        )
        self.d.dispatcher.renewed(execution_id, token, expires)
        return {"lease_expires_at": views.iso(expires)}
