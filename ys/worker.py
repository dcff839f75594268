"""The worker: one delivery of one execution, in its own process.

    python -m ys.worker               run the delivery named by YS_EXECUTION_ID / YS_DELIVERY_TOKEN
    python -m ys.worker --check FILE  import a script and print {"error", "schedule", "options"}

The worker reads workflow, params and context from the record through the API (never from the
environment or the command line), renews its lease while it runs, saves steps with its token,
and reports the outcome. Exit status 0 means an outcome was acknowledged; EXIT_RETRY means an
infrastructure failure: no outcome, the daemon redelivers.
"""

from __future__ import annotations

import _thread
import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

EXIT_RETRY = 75  # EX_TEMPFAIL


def load_script(path: str) -> Any:
    """Import a workflow script by path and return its workflow function (or raise)."""
    from ys.sdk import find_workflow

    name = Path(path).stem
    spec = importlib.util.spec_from_file_location(f"ys_workflow_{name.replace('-', '_')}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    from ys.codecache import compiled

    exec(compiled(path), vars(module))  # what exec_module does, minus compiling each time
    fn = find_workflow(vars(module))
    if fn is None:
        raise LookupError(f"{path} defines no @ys.workflow function and no function named main")
    return fn


def check(path: str) -> int:
    """Print whether a script imports; never lets a failure escape as a traceback."""
    error = None
    schedule = None
    options: dict[str, Any] = {}
    try:
        fn = load_script(path)
        opts = getattr(fn, "__ys_workflow__", {}) or {}
        simple = {k: v for k, v in opts.items() if isinstance(v, str | int | float | bool)}
        if opts.get("schedule"):
            schedule = simple
        options = {k: simple[k] for k in ("on_failure", "pin", "concurrency", "key") if k in simple}
    except BaseException as exc:  # noqa: BLE001 - anything the script does is its error
        error = f"{type(exc).__name__}: {exc}"
    sys.stdout.write(json.dumps({"error": error, "schedule": schedule, "options": options}) + "\n")
    return 0


class ApiBackend:
    """Step's backend in a worker: the daemon's API with this delivery's token."""

    def __init__(self, transport: Any, execution_id: str, *, channel: bool = False) -> None:
        self.transport = transport
        self.execution_id = execution_id
        self.base = f"/v1/executions/{quote(execution_id, safe='')}"
        self._channel: Any = None  # ys.channel.Channel, opened at the first step
        # A delivery's worker saves over its channel; `ys step` saves one step per process,
        # where opening a channel would only add a round trip.
        self._http_only = not channel

    def now(self) -> float:
        return time.time()

    def save_step(
        self,
        key: str,
        kind: str,
        status: str,
        value: str | None,
        attempts: int,
        wake_at: float | None,
    ) -> bool | None:
        body = {
            "kind": kind,
            "status": status,
            "value": value,
            "attempts": attempts,
            "wake_at": wake_at,
        }
        channel = self._channel
        if channel is not None:
            from ys.channel import ChannelClosed

            try:
                out = channel.call({"op": "step", "key": key, **body})
                return bool(out and out.get("cancel_requested"))
            except (ChannelClosed, OSError):
                # No answer: the save may or may not be committed. Saving it again over HTTP
                # is what a dropped keep-alive connection does too: a save is idempotent for
                # its delivery, and a daemon that is gone fails the HTTP request as well.
                self.close()
                self._http_only = True
        out = self.transport.request("PUT", f"{self.base}/steps/{quote(key, safe='')}", body)
        # The first save goes over HTTP (the connection that read the run state is open) and
        # the channel is opened once it is committed, before the step returns: a delivery that
        # saves one step or none never pays the opening, and the opening (a connect and an
        # upgrade) never sits between a step's side effects and its save, where it would widen
        # the window in which a cancel or a crash finds the step run but not saved.
        self.open_channel()
        return bool(out and out.get("cancel_requested"))

    def open_channel(self) -> Any:
        """The channel, opened now if it is not yet (None: saves go over HTTP)."""
        if self._channel is None and not self._http_only:
            from ys.channel import Channel
            from ys.errors import YsError

            t = self.transport
            try:
                self._channel = Channel(
                    t.socket_path, f"{self.base}/channel", t.token or "", t.timeout or 120.0
                )
            except (YsError, OSError):  # an older daemon, say: the HTTP route serves as well
                self._http_only = True
        return self._channel

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def start(self, key: str, workflow: str, params: Any, detached: bool) -> str:
        from ys.contract import check_start, request_params

        check_start(key, workflow)  # the client refuses what it cannot send
        # Encoded once, here: the store checks the canonical text, it does not encode again.
        body = {"workflow": workflow, "params_json": request_params(params), "detached": detached}
        out = self.transport.request("POST", f"{self.base}/starts/{quote(key, safe='')}", body)
        return str(out["execution_id"])

    def get(self, execution_id: str) -> dict[str, Any]:
        out: dict[str, Any] = self.transport.request(
            "GET", f"/v1/executions/{quote(execution_id, safe='')}"
        )
        return out

    def _effect(self, effect_id: str, verb: str, body: dict[str, Any]) -> Any:
        return self.transport.request(
            "POST", f"/v1/effects/{quote(effect_id, safe='')}/{verb}", body
        )

    def effect_begin(self, operation: str, effect_id: str, input: Any, key: str) -> dict[str, Any]:
        body = {
            "operation": operation,
            "input": input,
            "execution_id": self.execution_id,
            "step_key": key,
        }
        out: dict[str, Any] = self._effect(effect_id, "begin", body)
        return out

    def effect_settle(self, operation: str, effect_id: str, result: str) -> dict[str, Any]:
        out: dict[str, Any] = self._effect(
            effect_id, "settle", {"operation": operation, "result": result}
        )
        return out

    def value_wait(
        self, store_key: str, key: str, seen: int, timeout_at: float | None
    ) -> dict[str, Any] | None:
        body = {
            "execution_id": self.execution_id,
            "step_key": key,
            "seen": seen,
            "timeout_at": timeout_at,
        }
        out: dict[str, Any] = self.transport.request(
            "POST", f"/v1/store/{quote(store_key, safe='')}/wait", body
        )
        return out.get("found")

    def effect_wait(self, effect_id: str, key: str, wake_at: float) -> float:
        body = {"execution_id": self.execution_id, "step_key": key, "wake_at": wake_at}
        return float(self._effect(effect_id, "wait", body)["wake_at"])


def make_step(backend: ApiBackend, state: dict[str, Any]) -> Any:
    """The Step of a delivery, from what GET /run returned (the worker's and `ys step`'s)."""
    from ys.sdk import SavedStep, Step

    record = state["record"]
    steps = {
        s["key"]: SavedStep(s["kind"], s["status"], s.get("value"), s["attempts"], s.get("wake_at"))
        for s in state["steps"]
    }
    return Step(
        backend,
        execution_id=backend.execution_id,
        workflow=record["workflow"],
        context=record["context"],
        attempt=record["attempts"],
        steps=steps,
        cancel_requested=bool(record.get("cancel_requested", False)),
    )


def _heartbeat(
    socket_path: str, token: str, base: str, every: float, stop: threading.Event
) -> None:
    from ys.client import Transport
    from ys.errors import LeaseLost, YsError

    t = Transport(socket_path, timeout=max(every, 5.0), token=token)
    while not stop.wait(every):
        try:
            t.request("POST", f"{base}/lease", {})
        except LeaseLost:
            sys.stderr.write("ys: this delivery lost its lease; stopping\n")
            os._exit(EXIT_RETRY)
        except (YsError, OSError):
            continue  # the daemon may be busy; the lease covers a few missed beats


def deliver() -> int:
    from ys import codec
    from ys.client import Transport
    from ys.errors import YsError
    from ys.sdk import InfrastructureFailure, run_workflow

    execution_id = os.environ["YS_EXECUTION_ID"]
    token = os.environ["YS_DELIVERY_TOKEN"]
    socket_path = os.environ["YS_SOCKET"]
    script = os.environ["YS_WORKFLOW_FILE"]
    transport = Transport(socket_path, timeout=120.0, token=token)
    backend = ApiBackend(transport, execution_id, channel=True)
    try:
        state = transport.request("GET", f"{backend.base}/run")
    except YsError as exc:
        sys.stderr.write(f"ys: cannot read the execution: {exc.code}: {exc.message}\n")
        return EXIT_RETRY
    record = state["record"]
    if record["status"] in ("completed", "failed", "cancelled"):
        return 0  # a terminal execution keeps its outcome: no workflow code runs
    stop = threading.Event()
    # Not threading.Thread.start(): that waits until the new thread has been scheduled and
    # has run, milliseconds on a busy machine before the workflow's first line; the
    # heartbeat's first beat is a third of a lease away, so it can start whenever it gets
    # the CPU. (A low-level thread, like a daemon thread: it does not hold up the exit.)
    _thread.start_new_thread(
        _heartbeat, (socket_path, token, backend.base, max(0.2, state["lease_seconds"] / 3), stop)
    )
    step = make_step(backend, state)
    params = codec.decode(state["params"])
    try:
        fn = load_script(script)
        outcome = run_workflow(fn, step, params)
    except InfrastructureFailure as exc:
        sys.stderr.write(f"ys: {exc.code}: {exc.cause}; the delivery will be retried\n")
        return EXIT_RETRY
    except (ImportError, LookupError, SyntaxError) as exc:
        sys.stderr.write(f"ys: the script cannot be loaded: {type(exc).__name__}: {exc}\n")
        return EXIT_RETRY
    finally:
        sys.stdout.flush()
        stop.set()
    backend.close()
    try:
        transport.request("POST", f"{backend.base}/outcome", {"outcome": outcome})
    except YsError as exc:
        sys.stderr.write(f"ys: the outcome was not recorded: {exc.code}: {exc.message}\n")
        return EXIT_RETRY
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--check"] and len(args) == 2:
        return check(args[1])
    return deliver()


if __name__ == "__main__":
    sys.exit(main())
