"""The worker's routes over HTTP: a delivery's state, its steps, its children, its lease and
its outcome; all but the start are fenced by the delivery token (X-Ys-Token). `ys step` in a
shell workflow uses them. A Python workflow's worker asks the same over its channel
(ys/daemon/channel.py); both are thin adapters over the delivery service (ys.daemon.delivering).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from ys.daemon import answers, views
from ys.daemon.api_base import SMALL_BODY, _json, delivery_token, route
from ys.daemon.api_requests import Outcome, Start, StepDeadline, read_step

if TYPE_CHECKING:
    from ys.daemon.delivering import Deliveries
    from ys.daemon.parts import DaemonParts


E = "/v1/executions/{id}"


@dataclass(frozen=True)
class WorkerRoutes:
    """The worker's calls (fenced by the delivery token)."""

    d: DaemonParts  # the Daemon: store, registry, dispatcher, hub, paths
    deliveries: Deliveries  # what a delivery's worker asks (also its channel)

    @route("GET", E + "/run")
    async def run_state(self, request: web.Request) -> web.Response:
        execution_id, token = request.match_info["id"], delivery_token(request)
        record, steps = await self.d.hub.call(self.d.store.delivery_state, execution_id, token)
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

    @route("PUT", E + "/steps/{key}")
    async def save_step(self, request: web.Request) -> web.Response:
        req = await read_step(request)
        cancel = await self.deliveries.save_step_async(
            request.match_info["id"], delivery_token(request), request.match_info["key"], req
        )
        return _json(answers.step_saved(cancel))

    @route("POST", E + "/steps/{key}/deadline")
    async def step_deadline(self, request: web.Request) -> web.Response:
        """A worker announces the limit of one step attempt before its body runs. Fenced."""
        execution_id, token = request.match_info["id"], delivery_token(request)
        req = await StepDeadline.read(request)
        key = request.match_info["key"]
        await self.deliveries.deadline(execution_id, token, key, req)
        return _json(answers.deadline_set())

    @route("POST", E + "/starts/{key}")
    async def start(self, request: web.Request) -> web.Response:
        """A child start: idempotent by (caller, step key), not fenced."""
        req = await Start.read(request)
        caller, key = request.match_info["id"], request.match_info["key"]
        return _json(answers.started(await self.deliveries.start(caller, key, req)))

    @route("POST", E + "/outcome")
    async def outcome(self, request: web.Request) -> web.Response:
        req = await Outcome.read(request)
        execution_id = request.match_info["id"]
        token = delivery_token(request)
        outcome = req.outcome()
        big = len(await request.read()) > SMALL_BODY  # encoded in the pool, off the loop
        recorded = await self.deliveries.acknowledge_async(execution_id, token, outcome, big=big)
        return _json(answers.outcome(recorded))

    @route("POST", E + "/lease")
    async def renew(self, request: web.Request) -> web.Response:
        expires = await self.deliveries.renew(request.match_info["id"], delivery_token(request))
        return _json(answers.lease_renewed(expires))
