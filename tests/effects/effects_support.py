"""Helpers for RFC 004's conformance tests (fixtures live in conftest.py): the explicit clock
T0, FakeClient (the fake EffectClient + step store of the workflow-driver table) with
FakeProvider (its perform/lookup callbacks), and helpers for writing workflow scripts that use
the file-ledger provider of fake_provider.py. The effect client itself is tested per adapter
in tests/store/test_effect_client.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import T0, DaemonHandle, events, kinds, wait_until, write_script
from ys import codec
from ys.errors import WorkflowEffectError
from ys.sdk import NotFound, Settled, Step, Unknown, run_workflow
from ys.values import StepWrite

__all__ = [
    "EFFECTS_DIR",
    "T0",
    "Crash",
    "DaemonHandle",
    "FakeClient",
    "FakeProvider",
    "NotFound",
    "Settled",
    "Unknown",
    "events",
    "kinds",
    "script",
    "wait_until",
]

EFFECTS_DIR = Path(__file__).resolve().parent


class Crash(BaseException):
    """Stands for a worker killed at some point: nothing after it runs, nothing catches it."""


# -- the fake effect client (workflow driver) -------------------------------------------------


class FakeClient:
    """A Step backend that keeps RFC 004's EffectClient semantics in memory and records every
    call, in order, in `calls` (shared with FakeProvider, so callbacks interleave):
    ("begin", effect_id), ("settle", effect_id, result), ("wait", effect_id, wake_at),
    ("save", key, status), ("perform", effect_id), ("lookup", effect_id, answer).

    `script[method]` holds what the next calls of a client method do instead of the usual:
    an exception instance (raised) or a dict (returned)."""

    def __init__(self, execution_id: str = "order-42", clock: float = T0) -> None:
        self.execution_id = execution_id
        self.clock = clock
        self.calls: list[tuple[Any, ...]] = []
        self.effects: dict[str, dict[str, Any]] = {}
        self.waiters: dict[tuple[str, str, str], float] = {}
        self.conflicts: list[tuple[str, str, str]] = []
        self.saved: dict[str, StepWrite] = {}
        self.script: dict[str, list[BaseException | dict[str, Any]]] = {}

    # the names of the calls, in order
    def names(self) -> list[str]:
        return [c[0] for c in self.calls]

    def _scripted(self, method: str) -> dict[str, Any] | None:
        queue = self.script.get(method)
        if not queue:
            return None
        nxt = queue.pop(0)
        if isinstance(nxt, BaseException):
            raise nxt
        return nxt

    # -- the Backend protocol ---------------------------------------------------------------

    def now(self) -> float:
        return self.clock

    def save_step(self, key: str, step: StepWrite) -> bool | None:
        self.calls.append(("save", key, step.status))
        self.saved[key] = step
        return False

    def start(self, key: str, workflow: str, params: Any, detached: bool) -> str:
        raise AssertionError("the effect driver never starts children")

    def get(self, execution_id: str) -> dict[str, Any]:
        raise AssertionError("the effect driver never reads records")

    def effect_begin(self, operation: str, effect_id: str, input: Any, key: str) -> dict[str, Any]:
        self.calls.append(("begin", effect_id))
        scripted = self._scripted("begin")
        if scripted is not None:
            return scripted
        canonical = codec.dumps(input)
        e = self.effects.get(effect_id)
        if e is None:
            self.effects[effect_id] = {
                "operation": operation,
                "input": canonical,
                "status": "pending",
                "result": None,
            }
            return {"status": "new"}
        if e["operation"] != operation or e["input"] != canonical:
            raise WorkflowEffectError(
                "EFFECT_REQUEST_MISMATCH", f"effect {effect_id!r} exists with another request"
            )
        if e["status"] == "settled":
            return {"status": "settled", "result": e["result"]}
        return {"status": "pending"}

    def effect_settle(self, operation: str, effect_id: str, result: str) -> dict[str, Any]:
        self.calls.append(("settle", effect_id, result))
        scripted = self._scripted("settle")
        if scripted is not None:
            return scripted
        return self.settle(effect_id, result)

    def effect_wait(self, effect_id: str, key: str, wake_at: float) -> float:
        self.calls.append(("wait", effect_id, wake_at))
        scripted = self._scripted("wait")
        if scripted is not None:
            return float(scripted["wake_at"])
        ident = (effect_id, self.execution_id, key)
        first = self.waiters.get(ident)
        if first is not None and first > self.clock:
            return first
        self.waiters[ident] = wake_at
        return wake_at

    # -- what another runtime (or the test) does to the effect ledger ------------------------

    def settle(self, effect_id: str, result: str) -> dict[str, Any]:
        e = self.effects[effect_id]
        if e["status"] == "settled":
            if e["result"] == result:
                return {"status": "settled", "result": result}
            self.conflicts.append((effect_id, e["result"], result))
            return {"status": "conflict", "result": e["result"], "conflicting_result": result}
        e.update(status="settled", result=result)
        for ident in [w for w in self.waiters if w[0] == effect_id]:
            del self.waiters[ident]
        return {"status": "settled", "result": result}

    def pending(
        self, effect_id: str, operation: str = "charge.v1", input: dict[str, Any] | None = None
    ) -> None:
        """An effect some earlier attempt began (its outcome unknown)."""
        self.effects[effect_id] = {
            "operation": operation,
            "input": codec.dumps({"amount": 49.99} if input is None else input),
            "status": "pending",
            "result": None,
        }

    # -- deliveries ----------------------------------------------------------------------------

    def step(self, attempt: int = 1) -> Step:
        """A Step for one delivery attempt, replaying what has been saved so far."""
        return Step(
            self,
            execution_id=self.execution_id,
            workflow="charge-order",
            context={},
            attempt=attempt,
            steps=dict(self.saved),
            cancel_requested=False,
        )

    def run(self, fn: Callable[..., Any], params: Any = None, attempt: int = 1) -> dict[str, Any]:
        return run_workflow(fn, self.step(attempt), params or {})


class FakeProvider:
    """perform/lookup callbacks of an external system that keeps RFC 004's contract (one
    charge per effect ID). `perform_script` / `lookup_script` override the next calls: a
    callable (called with the effect ID; its return value is the callback's), or an exception
    instance (raised). Every call is recorded in the client's `calls`."""

    def __init__(self, client: FakeClient, amount: float = 49.99) -> None:
        self.client = client
        self.amount = amount
        self.charges: dict[str, dict[str, Any]] = {}
        self.perform_script: list[Any] = []
        self.lookup_script: list[Any] = []

    def charge(self, effect_id: str) -> dict[str, Any]:
        if effect_id not in self.charges:
            self.charges[effect_id] = {
                "charge_id": f"ch_{len(self.charges) + 1}",
                "amount": self.amount,
            }
        return self.charges[effect_id]

    def perform(self, effect_id: str) -> Any:
        self.client.calls.append(("perform", effect_id))
        if self.perform_script:
            nxt = self.perform_script.pop(0)
            if isinstance(nxt, BaseException):
                raise nxt
            return nxt(effect_id)
        return self.charge(effect_id)

    def lookup(self, effect_id: str) -> Any:
        if self.lookup_script:
            nxt = self.lookup_script.pop(0)
            if isinstance(nxt, BaseException):
                self.client.calls.append(("lookup", effect_id, "raised"))
                raise nxt
            answer = nxt(effect_id)
        elif effect_id in self.charges:
            answer = Settled(self.charges[effect_id])
        else:
            answer = NotFound()
        self.client.calls.append(("lookup", effect_id, type(answer).__name__))
        return answer


# -- workflow scripts for a real daemon --------------------------------------------------------


PRELUDE = f"""\
import os
import pathlib
import signal
import sys

sys.path.insert(0, {str(EFFECTS_DIR)!r})
import ys
from fake_provider import FileProvider

"""


def script(daemon: DaemonHandle, name: str, body: str) -> Path:
    """Write workflow `<name>.py`: PRELUDE (ys, FileProvider) then the dedented body."""
    return write_script(daemon, name, body, PRELUDE)
