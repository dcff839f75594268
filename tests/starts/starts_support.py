"""Helpers for RFC 003's conformance tests (fixtures live in conftest.py): the explicit clock
T0 and FakeBackend, the fake WorkflowStartClient + step store of the workflow-driver table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support import (
    T0,
    DaemonHandle,
    fixture_dir,
    kinds,
    lines,
    make_home,
    prelude,
    wait_until,
    write_script,
)
from tests.support import events as history
from ys.errors import NotFoundError, WorkflowStartError
from ys.sdk import Step, run_workflow
from ys.values import StepWrite

__all__ = [
    "PRELUDE",
    "T0",
    "DaemonHandle",
    "FakeBackend",
    "fixture_dir",
    "history",
    "kinds",
    "lines",
    "make_home",
    "wait_until",
    "write_scripts",
]


# -- the fake start client (workflow driver) -------------------------------------------------


class FakeBackend:
    """A Step backend that records every call; its `start` is a fake WorkflowStartClient.

    By default `start` behaves as RFC 003's client does: it validates like ApiBackend (the
    workflow name, then the params with the durable value codec: INVALID_START_PARAMETERS),
    remembers each request ID (caller, step key) with its workflow and canonical params,
    returns the first execution ID for a matching repeat and refuses a changed one with
    START_REQUEST_MISMATCH. `script` overrides what the next start calls do: an exception
    (raised) or a string (returned as the execution ID)."""

    def __init__(self, execution_id: str = "order-42", clock: float = T0) -> None:
        self.execution_id = execution_id
        self.clock = clock
        self.calls: list[tuple[Any, ...]] = []  # every start call: (request ID, workflow, ...)
        self.saved: dict[str, StepWrite] = {}  # the durable steps save_step recorded
        self.save_log: list[tuple[str, str, str]] = []  # (key, kind, status), in order
        self.requests: dict[tuple[str, str], tuple[str, str, str]] = {}
        self.script: list[BaseException | str] = []
        self.records: dict[str, dict[str, Any]] = {}  # what get() returns, by execution ID
        self.fail_saves = 0  # the next n saves raise OSError (the caller stops unrecorded)
        self.cancel = False  # what save_step answers: a cancellation has been requested

    def now(self) -> float:
        return self.clock

    def save_step(self, key: str, step: StepWrite) -> bool | None:
        if self.fail_saves:
            self.fail_saves -= 1
            raise OSError("the connection dropped before the step was recorded")
        self.saved[key] = step
        self.save_log.append((key, step.kind, step.status))
        return self.cancel

    def start(self, key: str, workflow: str, params: Any, detached: bool) -> str:
        from ys.contract import check_start, request_params

        request_id = (self.execution_id, key)
        self.calls.append((request_id, workflow, params, detached))
        if self.script:
            what = self.script.pop(0)
            if isinstance(what, BaseException):
                raise what
            return what
        check_start(key, workflow)
        canonical = request_params(params)
        known = self.requests.get(request_id)
        if known is None:
            target = f"{workflow}-{len(self.requests) + 1}"
            self.requests[request_id] = (workflow, canonical, target)
            self.records[target] = {
                "execution_id": target,
                "workflow": workflow,
                "status": "admitted",
                "outcome": None,
            }
            return target
        if known[:2] != (workflow, canonical):
            raise WorkflowStartError(
                "START_REQUEST_MISMATCH", f"step {key!r} already started {known[0]} ({known[2]})"
            )
        return known[2]

    def get(self, execution_id: str) -> dict[str, Any]:
        if execution_id not in self.records:
            raise NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
        return self.records[execution_id]

    def end(self, execution_id: str, outcome: dict[str, Any]) -> None:
        """The child reached a terminal outcome."""
        self.records[execution_id] = dict(
            self.records[execution_id], status=outcome["status"], outcome=outcome
        )

    def step(self, attempt: int = 1, cancel_requested: bool = False) -> Step:
        """A Step for one delivery attempt, replaying what has been saved so far."""
        return Step(
            self,
            execution_id=self.execution_id,
            workflow="charge-order",
            context={},
            attempt=attempt,
            steps=dict(self.saved),
            cancel_requested=cancel_requested,
        )

    def run(
        self,
        fn: Callable[..., Any],
        params: Any = None,
        attempt: int = 1,
        cancel_requested: bool = False,
    ) -> dict[str, Any]:
        """One delivery attempt: run_workflow's outcome (InfrastructureFailure propagates)."""
        return run_workflow(fn, self.step(attempt, cancel_requested), params or {})


# -- real daemons and their workflow scripts ------------------------------------------------

PRELUDE = prelude(start_pid=False)  # block() notes <name>:start (no PID)


def write_scripts(daemon: DaemonHandle, scripts: dict[str, str]) -> None:
    """Write `<name>.py` = PRELUDE + body for each script, then wait until the daemon's
    registry knows every one of them (a child started before its script is known would wait
    for the registry, not run)."""
    for name, body in scripts.items():
        write_script(daemon, name, body, PRELUDE)
    client = daemon.client()

    def known() -> bool:
        listed = {w["name"]: w for w in client.workflows()["workflows"]}
        return all(n in listed and not listed[n].get("error") for n in scripts)

    wait_until(known, timeout=20, message="the registry lists the new scripts")
