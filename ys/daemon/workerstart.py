"""What a delivery's worker is started with: the script version it runs, its launch (the
delivery and its run state, for a Python worker), its environment and its trace context."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ys import tracing
from ys.daemon.hub import Hub
from ys.daemon.registry import Registry, Workflow
from ys.daemon.running import Running
from ys.daemon.versions import copy_path
from ys.paths import Paths
from ys.store.protocols import Delivery, RunState, Store
from ys.worker.wire import Launch

if TYPE_CHECKING:
    from ys.daemon.tracing import Tracer

log = logging.getLogger("ys.dispatcher")


class WorkerStart:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        paths: Paths,
        hub: Hub,
        tracer: Tracer | None,
        lease_seconds: float,
    ) -> None:
        self.store = store
        self.registry = registry
        self.paths = paths
        self.hub = hub
        self.tracer = tracer  # exports traces (ys.daemon.tracing); None: tracing is off
        self.lease_seconds = lease_seconds

    def pinned(self, d: Delivery, wf: Workflow | None) -> Workflow | None:
        """A pinned delivery's version kept under <data>/scripts/, as the workflow it runs
        when its script is missing or broken now; None when it is not pinned or no copy is
        kept (docs/design.md, "Workflow options")."""
        if not d.pinned or d.script_sha256 is None:
            return None
        from dataclasses import replace

        kept = self.paths.data / "scripts"
        for kind in (wf.kind,) if wf is not None else ("python", "shell"):
            copy = copy_path(kept, d.script_sha256, kind)
            if copy.is_file():
                folder = str(self.registry.folder)
                if wf is None:
                    return Workflow(
                        d.workflow, kind, str(copy), sha256=d.script_sha256, folder=folder
                    )
                return replace(
                    wf, kind=kind, path=str(copy), folder=folder, error=None, sha256=d.script_sha256
                )
        return None

    def version(self, d: Delivery, wf: Workflow) -> Workflow:
        """The script this delivery runs: the version its claim recorded (the bytes run are
        the bytes hashed). A Python worker reads the workflow's file and checks it is that
        version (`start_of` passes the hash and the kept copy); a shell script runs the
        kept copy itself, from the workflows folder, as does any delivery of another version
        than the file's (a pinned execution whose script was edited since its admission)."""
        if d.script_sha256 is None:
            return wf
        from dataclasses import replace

        copy = copy_path(self.paths.data / "scripts", d.script_sha256, wf.kind)
        if not copy.exists():
            log.warning(
                "%s: version %s of %s is gone; running the current script",
                d.execution_id,
                d.script_sha256[:12],
                wf.name,
            )
            return wf
        if wf.kind == "python" and d.script_sha256 == wf.sha256:
            return wf
        return replace(wf, path=str(copy), folder=wf.folder or str(Path(wf.path).parent))

    async def traceparent(self, d: Delivery) -> str | None:
        """The trace context the worker runs its steps in: the execution's span when this
        daemon exports traces, else the caller's `traceparent` the execution was admitted with
        (read from its run state only where the context names one)."""
        if self.tracer is not None:
            return await self.tracer.traceparent_for(d.execution_id)
        state = d.state
        if state is None or "traceparent" not in state.context_json:
            return None
        import json

        context = json.loads(state.context_json)
        text = context.get("traceparent") if isinstance(context, dict) else None
        return text if isinstance(text, str) and tracing.parse(text) is not None else None

    async def start_of(self, r: Running, wf: Workflow) -> Launch | None:
        """A Python worker's launch: the delivery and its run state (the claim read it)."""
        if wf.kind != "python":
            return None
        d = r.delivery
        state = d.state
        if state is None:  # a delivery from a claim that did not read it
            record, steps = await self.hub.call(self.store.delivery_state, d.execution_id, d.token)
            state = RunState(record.params_json, record.context_json, steps)
        launch: Launch = {
            "execution_id": d.execution_id,
            "attempt": d.attempt,
            "workflow": d.workflow,
            "script": wf.path,
            "lease_seconds": self.lease_seconds,
            "lease_since": r.lease_since,  # time.monotonic(), the box's: ys.guard
            # the store's clock (on PostgreSQL the server's) less this box's: a step's times
            # (a sleep's wake) are the store's (docs/design.md, "On PostgreSQL")
            "clock_offset": self.store.clock() - time.time(),
            "params": state.params_json,
            "context": state.context_json,
            "cancel_requested": d.cancel_requested,
            "steps": [
                (s.key, s.kind, s.status, s.value, s.attempts, s.wake_at) for s in state.steps
            ],
        }
        self._keep(d, launch)
        return launch

    def _keep(self, d: Delivery, launch: Launch) -> None:
        """The version a Python delivery's claim recorded and its kept copy, which the worker
        runs unless the script's bytes are that version; nothing when no copy is kept (the
        claim's version is another box's, say): the worker runs the file as it is."""
        if d.script_sha256 is None:
            return
        copy = copy_path(self.paths.data / "scripts", d.script_sha256, "python")
        if copy.is_file():
            launch["sha256"], launch["copy"] = d.script_sha256, str(copy)

    def env(self, d: Delivery, script: str) -> dict[str, str]:
        """The delivery's own environment variables (the launcher sets them over the
        daemon's environment)."""
        return {
            "YS_EXECUTION_ID": d.execution_id,
            "YS_DELIVERY_TOKEN": d.token,
            "YS_SOCKET": str(self.paths.socket),
            "YS_WORKFLOW_FILE": script,
            "YS_ATTEMPT": str(d.attempt),
            # what `ys step` adds to this box's clock for the store's (docs/design.md, "On PostgreSQL")
            "YS_CLOCK_OFFSET": repr(self.store.clock() - time.time()),
        }
