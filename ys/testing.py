"""ys.testing: run workflows in-process against a temporary store, with a clock the test moves.

    from ys.testing import WorkflowTest

    with WorkflowTest({"charge-order": charge_order.main}) as t:
        eid = t.trigger("charge-order", {"order": 42})
        t.run()                      # deliveries due now, until none is due
        assert t.get(eid)["status"] == "suspended"
        t.advance(600)               # move the clock; nothing sleeps
        t.run()
        assert t.get(eid)["outcome"]["result"] == {...}

Deliveries go through the same store operations, the same `Step` and the same outcome rules as
a worker under the daemon, so outcomes match a real delivery's.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ys import codec
from ys.outcomes import outcome_of
from ys.sdk import InfrastructureFailure, Step, run_workflow
from ys.store.protocols import Delivery, Effect, Store
from ys.values import EffectStateJson, StepWrite, ValueFoundJson


class Clock:
    """A clock that only moves when the test says so."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


class _StoreBackend:
    def __init__(self, test: WorkflowTest, execution_id: str, token: str) -> None:
        self.test = test
        self.store = test.store
        self.clock = test.clock
        self.execution_id = execution_id
        self.token = token
        # The attempt of a step run with timeout=: (key, monotonic deadline, timeout,
        # attempts, retry delay), as the daemon registers it before the step's body runs.
        self.deadline: tuple[str, float, float, int, float | None] | None = None

    def now(self) -> float:
        return self.clock.now

    def step_deadline(
        self, key: str, timeout: float, attempts: int, retry_delay: float | None
    ) -> None:
        self.deadline = (key, time.monotonic() + timeout, timeout, attempts, retry_delay)

    def _check_step(self, key: str) -> None:
        """Before a step's save: a crash the test asked for, or an attempt that ran past its
        timeout (recorded as the daemon records it when it kills the worker)."""
        if key in self.test._crash_at:
            self.test._crash_at.discard(key)
            raise _Killed("lease_expired", f"crashed in step {key!r} (WorkflowTest.crash_at)")
        deadline, self.deadline = self.deadline, None
        if deadline is None or deadline[0] != key or time.monotonic() <= deadline[1]:
            return
        _, _, timeout, attempts, retry_delay = deadline
        error = codec.ErrorValue(
            "StepTimeout",
            f"step {key!r} ran past its timeout of {timeout:g} s; its worker was killed",
            "STEP_TIMEOUT",
        )
        wake = None if retry_delay is None else self.clock.now + retry_delay
        self.store.save_step(
            self.execution_id,
            self.token,
            key,
            StepWrite(
                "run",
                "failed" if wake is None else "waiting",
                codec.dumps(error),
                attempts=attempts,
                wake_at=wake,
            ),
        )
        raise _Killed("step_timeout", f"step {key!r} ran past its timeout", retry_at=wake)

    def save_step(self, key: str, step: StepWrite) -> bool | None:
        self._check_step(key)
        return bool(self.store.save_step(self.execution_id, self.token, key, step))

    def start(self, key: str, workflow: str, params: Any, detached: bool) -> str:
        from ys.contract import check_start, request_params

        check_start(key, workflow)
        self.test._known(workflow)
        return self.store.start(
            self.execution_id, key, workflow, request_params(params), detached=detached
        )

    def get(self, execution_id: str) -> dict[str, Any]:
        from ys.daemon.views import record

        r = self.store.get(execution_id)
        if r is None:
            from ys.errors import NotFoundError

            raise NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
        out: dict[str, Any] = dict(record(r))
        return out

    def effect_begin(self, operation: str, effect_id: str, input: Any, key: str) -> EffectStateJson:
        return self.store.effect_begin(
            operation, effect_id, input, self.execution_id, key
        ).to_json()

    def effect_settle(self, operation: str, effect_id: str, result: str) -> EffectStateJson:
        return self.store.effect_settle(operation, effect_id, result).to_json()

    def value_wait(
        self, store_key: str, key: str, seen: int, timeout_at: float | None
    ) -> ValueFoundJson | None:
        found = self.store.value_wait(store_key, self.execution_id, key, seen, timeout_at)
        return None if found is None else found.to_json()

    def effect_wait(self, effect_id: str, key: str, wake_at: float) -> float:
        return float(self.store.effect_wait(effect_id, self.execution_id, key, wake_at))


class _Killed(BaseException):
    """The delivery's worker dies here (a crash, or the daemon killing a step past its
    timeout): no outcome, the store releases the delivery."""

    def __init__(self, reason: str, detail: str, retry_at: float | None = None) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.retry_at = reason, detail, retry_at


class WorkflowTest:
    """A temporary store and a set of workflows (name -> function, or a folder of scripts).

    Python workflows only: a folder's shell workflows (executable files without `.py`) are
    refused at `trigger` with NotImplementedError; test them through a daemon.
    A step's `timeout=` is measured (nothing can kill the test's own process): an attempt
    that ran past it is recorded as the daemon records it, its result discarded.
    """

    def __init__(
        self,
        workflows: dict[str, Callable[..., Any]] | str | Path,
        *,
        start: float | None = None,
        lease_seconds: float = 30.0,
    ) -> None:
        from ys.store import open_store

        self.clock = Clock(start)
        self._dir = tempfile.mkdtemp(prefix="ys-test-")
        self.store: Store = open_store(
            Path(self._dir) / "ys.db", clock=self.clock, lease_seconds=lease_seconds
        )
        self.shell: set[str] = set()  # shell workflows of a folder: refused at trigger
        if isinstance(workflows, dict):
            self.workflows = dict(workflows)
        else:
            self.workflows, self.shell = _load_folder(Path(workflows))
        self.deliveries = 0
        self._crash_at: set[str] = set()

    def __enter__(self) -> WorkflowTest:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- what a test does -------------------------------------------------------------------

    def trigger(
        self,
        workflow: str,
        params: Any = None,
        execution_id: str | None = None,
        if_exists: str = "fail",
    ) -> str:
        """`ys trigger`: admit an execution; NotFoundError (WORKFLOW_NOT_FOUND) for a name
        this test does not know, as the daemon refuses it."""
        self._known(workflow)
        return self.store.admit(
            workflow, params, execution_id=execution_id, if_exists=if_exists
        ).execution_id

    def _known(self, workflow: str) -> None:
        if workflow in self.shell:
            raise NotImplementedError(
                f"{workflow} is a shell workflow: ys.testing runs Python workflows only; "
                "test it through a daemon (`ys trigger --wait`)"
            )
        if workflow not in self.workflows:
            from ys.errors import NotFoundError

            known = ", ".join(sorted(self.workflows)) or "none"
            raise NotFoundError(
                "WORKFLOW_NOT_FOUND", f"no workflow named {workflow!r} (this test has: {known})"
            )

    def put(self, key: str, value: Any, expected_version: int | None = None) -> int:
        """`ys store put`: commit a value and wake its waiters; returns the new version."""
        return self.store.value_put(key, value, expected_version).version

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def cancel(self, execution_id: str, now: bool = False) -> bool:
        """`ys cancel` (`now`: `--now`, ended cancelled at once); False if nothing changed.
        Without `now` the workflow sees WorkflowCancelledError at its next step that is not
        history, when it is next delivered (`run`)."""
        return bool(self.store.cancel(execution_id, at_once=now))

    def crash_at(self, step_key: str) -> None:
        """The next delivery that finishes step `step_key` dies just before saving it (its
        lease lost mid-step, a crash): nothing of the step is saved, the delivery is
        released, and the next delivery runs the step again."""
        self._crash_at.add(step_key)

    def history(self, execution_id: str) -> list[dict[str, Any]]:
        """The execution's events, oldest first: {"seq", "at" (epoch seconds), "kind",
        "data"}, the events `ys history` shows."""
        out: list[dict[str, Any]] = []
        token = None
        while True:
            page = self.store.history(execution_id, limit=1000, page_token=token)
            out += [
                {
                    "seq": h.seq,
                    "at": h.event.at,
                    "kind": h.event.kind,
                    "data": h.event.data.to_json(),
                }
                for h in page.items
            ]
            token = page.next_page_token
            if not token:
                return out

    def steps(self, execution_id: str) -> list[dict[str, Any]]:
        """The execution's steps in the order first recorded, as `ys describe` shows them
        ({"key", "kind", "status", "value" (decoded), "attempts", "wake_at"})."""
        return [
            {
                "key": s.key,
                "kind": s.kind,
                "status": s.status,
                "value": codec.decode(s.value) if s.value is not None else None,
                "attempts": s.attempts,
                "wake_at": s.wake_at,
            }
            for s in self.store.steps(execution_id)
        ]

    def effect(self, effect_id: str) -> dict[str, Any]:
        """One effect of the ledger, as `ys effect ID --json` shows it."""
        found = self.store.effect(effect_id)
        if found is None:
            from ys.errors import NotFoundError

            raise NotFoundError("NOT_FOUND", f"effect {effect_id!r} does not exist")
        return _effect_dict(found)

    def effects(self, status: str | None = None) -> list[dict[str, Any]]:
        """The effect ledger, optionally only `pending` or `settled` effects."""
        return [_effect_dict(e) for e in self.store.effects(status=status)]

    def get(self, execution_id: str) -> dict[str, Any]:
        from ys.daemon.views import record

        r = self.store.get(execution_id)
        if r is None:
            from ys.errors import NotFoundError

            raise NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
        out: dict[str, Any] = dict(record(r))
        return out

    def run(self, max_deliveries: int = 1000) -> int:
        """Deliver everything due at the current time, until nothing is due; returns how many
        deliveries ran."""
        n = 0
        while n < max_deliveries:
            due = self.store.claim_due(limit=1)
            if not due:
                return n
            self._deliver(due[0])
            n += 1
        raise AssertionError(f"still delivering after {max_deliveries} deliveries")

    def run_until_terminal(
        self, execution_id: str, max_wait: float = 365 * 86400.0
    ) -> dict[str, Any]:
        """Deliver, moving the clock to each next due time, until the execution is terminal."""
        limit = self.clock.now + max_wait
        while True:
            self.run()
            rec = self.get(execution_id)
            if rec["status"] in ("completed", "failed", "cancelled"):
                return rec
            nxt = self.store.next_due_at()
            if nxt is None or nxt > limit:
                return rec
            if nxt > self.clock.now:
                self.clock.now = nxt

    # -- one delivery, as a worker would run it ---------------------------------------------

    def _deliver(self, d: Delivery) -> None:
        self.deliveries += 1
        fn = self.workflows.get(d.workflow)
        if fn is None:
            self.store.release(
                d.execution_id,
                d.token,
                retry_at=self.clock.now + 3600,
                reason="workflow_unavailable",
                detail=f"workflow {d.workflow} is missing",
            )
            return
        record, steps = self.store.delivery_state(d.execution_id, d.token)
        step = Step(
            _StoreBackend(self, d.execution_id, d.token),
            execution_id=d.execution_id,
            workflow=d.workflow,
            context=codec.decode(record.context_json),
            attempt=record.attempts,
            steps={s.key: s.write for s in steps},
            cancel_requested=record.cancel_requested,
        )
        try:
            outcome = run_workflow(fn, step, codec.decode(record.params_json))
        except _Killed as killed:
            retry_at = killed.retry_at if killed.retry_at is not None else self.clock.now
            self.store.release(
                d.execution_id,
                d.token,
                retry_at=retry_at,
                reason=killed.reason,
                detail=killed.detail,
            )
            return
        except InfrastructureFailure as exc:
            # as the daemon: a delivery that ends without an outcome counts toward the
            # workflow's max_attempts, and the last one fails the execution
            self.store.release(
                d.execution_id,
                d.token,
                retry_at=self.clock.now,
                reason="worker_failed",
                detail=f"{exc.code}: {exc}" if getattr(exc, "code", None) else str(exc),
                max_attempts=_max_attempts(fn),
            )
            return
        self.store.acknowledge(d.execution_id, d.token, outcome_of(outcome))


def _max_attempts(fn: Callable[..., Any]) -> int:
    """The workflow's `max_attempts` option (the daemon's default when it has none)."""
    from ys.daemon.scripts import DEFAULT_MAX_ATTEMPTS

    options = getattr(fn, "__ys_workflow__", None) or {}
    value = options.get("max_attempts")
    return value if isinstance(value, int) and value >= 1 else DEFAULT_MAX_ATTEMPTS


def _load_folder(folder: Path) -> tuple[dict[str, Callable[..., Any]], set[str]]:
    """The folder's Python workflows, and the names of its shell workflows."""
    import os

    from ys.worker.delivery import load_script

    python = {
        p.stem: load_script(str(p))
        for p in sorted(folder.glob("*.py"))
        if not p.name.startswith((".", "_"))
    }
    shell = {
        p.name
        for p in folder.iterdir()
        if p.is_file()
        and p.suffix != ".py"
        and not p.name.startswith((".", "_"))
        and os.access(p, os.X_OK)
    }
    return python, shell


def _effect_dict(e: Effect) -> dict[str, Any]:
    """An effect record as this class shows it: times in epoch seconds, values decoded."""
    out: dict[str, Any] = {
        "effect_id": e.effect_id,
        "operation": e.operation,
        "input": e.input,
        "status": e.status,
        "result": e.result,
        "created_at": e.created_at,
        "settled_at": e.settled_at,
        "conflicts": [asdict(c) for c in e.conflicts],
    }
    if e.began_by is not None:
        out["began_by"] = [asdict(b) for b in e.began_by]
    if e.waiters is not None:
        out["waiters"] = [asdict(w) for w in e.waiters]
    return out
