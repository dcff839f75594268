"""The worker: one delivery of one execution, in its own process.

    python -m ys.worker               run the delivery the daemon hands over (see below)
    python -m ys.worker --check FILE  import a script and print {"error", "schedule", "options"}

A delivery talks to the daemon over its channel (ys/worker/channel.py), a socket the daemon hands it
at its launch: a child of the fork server gets it as the socket it was forked with; a spawned
worker finds it as the descriptor named by YS_CHANNEL_FD. The launch (the channel's first
line) carries the delivery and its run state, so the worker reads nothing before the
workflow's first line runs. The worker renews its lease while it runs, saves steps, and
reports the outcome, all over the channel. Exit status 0 means an outcome was acknowledged;
EXIT_RETRY means an infrastructure failure: no outcome, the daemon redelivers.
"""

from __future__ import annotations

import _thread
import importlib.util
import json
import math
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ys.values import EffectStateJson, StepWrite, ValueFoundJson
from ys.worker.wire import Launch

EXIT_RETRY = 75  # EX_TEMPFAIL


def load_script(path: str, sha256: str | None = None, copy: str | None = None) -> Any:
    """Import a workflow script by path and return its workflow function (or raise). With
    `sha256`, the version its delivery recorded: the file is read once and its bytes run only
    if they are that version (an edit since the claim is not run under the claim's hash),
    else the version's kept copy at `copy` runs, still under the name `path`."""
    from ys.worker.codecache import compiled

    try:
        source: bytes | None = _read(path)
    except OSError:
        if sha256 is None:
            raise
        source = None  # removed since the claim: the version it recorded is kept
    if sha256 is not None and (source is None or _sha256(source) != sha256):
        if copy is None:
            raise ImportError(f"{path} is no longer version {sha256[:12]} and none is kept")
        try:
            source = _read(copy)
        except OSError as exc:
            raise ImportError(f"version {sha256[:12]} of {path} is not kept: {exc}") from None
        if _sha256(source) != sha256:
            raise ImportError(f"the kept copy of version {sha256[:12]} of {path} is damaged")
    assert source is not None
    return _run_module(path, lambda: compiled(path, source))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _run_module(path: str, code: Any) -> Any:
    """What importing the script at `path` does, with its code from `code()` (the cache's,
    not compiled each time); its workflow function."""
    from ys.sdk import find_workflow

    name = Path(path).stem
    spec = importlib.util.spec_from_file_location(f"ys_workflow_{name.replace('-', '_')}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    exec(code(), vars(module))
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
        if opts.get("schedule") or opts.get("every"):
            schedule = simple
        if "params" in opts:  # a JSON object, checked by the registry as a header's are
            try:
                json.dumps(opts["params"])
                given = opts["params"]
            except (TypeError, ValueError):
                given = repr(opts["params"])
            schedule = {**(schedule or {}), "params": given}
        # Every option goes to the registry, which checks them (ys.daemon.scripts): one it
        # cannot read back from JSON is sent as its repr, and refused there as a bad value.
        options = {
            k: simple.get(k, repr(v))
            for k, v in opts.items()
            if k
            not in (
                "schedule",
                "every",
                "tz",
                "catch_up",
                "overlap",
                "max_late",
                "jitter",
                "params",
            )
        }
    except BaseException as exc:  # noqa: BLE001 - anything the script does is its error
        error = f"{type(exc).__name__}: {exc}"
    sys.stdout.write(json.dumps({"error": error, "schedule": schedule, "options": options}) + "\n")
    return 0


def _offset(value: Any) -> float:
    """The daemon's clock offset (a number, or its text in YS_CLOCK_OFFSET); 0 if none."""
    try:
        offset = float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return offset if math.isfinite(offset) else 0.0


def _step_body(step: StepWrite) -> dict[str, Any]:
    """A step's save as the daemon reads it (the HTTP body, a channel request's fields)."""
    return {
        "kind": step.kind,
        "status": step.status,
        "value": step.value,
        "attempts": step.attempts,
        "wake_at": step.wake_at,
    }


class ApiBackend:
    """Step's backend over HTTP with a delivery's token: `ys step` in a shell workflow."""

    def __init__(self, transport: Any, execution_id: str) -> None:
        self.transport = transport
        self.execution_id = execution_id
        self.base = f"/v1/executions/{quote(execution_id, safe='')}"
        self.offset = _offset(os.environ.get("YS_CLOCK_OFFSET"))

    def now(self) -> float:
        """The store's time (on PostgreSQL the server's): this box's plus the daemon's offset."""
        return time.time() + self.offset

    def save_step(self, key: str, step: StepWrite) -> bool | None:
        body = _step_body(step)
        out = self.transport.request("PUT", f"{self.base}/steps/{quote(key, safe='')}", body)
        return bool(out and out.get("cancel_requested"))

    def step_deadline(
        self, key: str, timeout: float, attempts: int, retry_delay: float | None
    ) -> None:
        """Tell the daemon that this attempt of step `key` may run `timeout` seconds: past
        them it kills this worker and records the attempt (registered before the body runs)."""
        body = {"timeout": timeout, "attempts": attempts, "retry_delay": retry_delay}
        self.transport.request("POST", f"{self.base}/steps/{quote(key, safe='')}/deadline", body)

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

    def effect_begin(self, operation: str, effect_id: str, input: Any, key: str) -> EffectStateJson:
        body = {
            "operation": operation,
            "input": input,
            "execution_id": self.execution_id,
            "step_key": key,
        }
        out: EffectStateJson = self._effect(effect_id, "begin", body)
        return out

    def effect_settle(self, operation: str, effect_id: str, result: str) -> EffectStateJson:
        out: EffectStateJson = self._effect(
            effect_id, "settle", {"operation": operation, "result": result}
        )
        return out

    def value_wait(
        self, store_key: str, key: str, seen: int, timeout_at: float | None
    ) -> ValueFoundJson | None:
        body = {
            "execution_id": self.execution_id,
            "step_key": key,
            "seen": seen,
            "timeout_at": timeout_at,
        }
        out: dict[str, ValueFoundJson | None] = self.transport.request(
            "POST", f"/v1/store/{quote(store_key, safe='')}/wait", body
        )
        return out.get("found")

    def effect_wait(self, effect_id: str, key: str, wake_at: float) -> float:
        body = {"execution_id": self.execution_id, "step_key": key, "wake_at": wake_at}
        return float(self._effect(effect_id, "wait", body)["wake_at"])


class ChannelBackend:
    """Step's backend in a delivery's worker: its channel to the daemon (ys/worker/channel.py),
    which knows the delivery, so no request names its execution or carries its token."""

    def __init__(self, channel: Any, execution_id: str, offset: float = 0.0) -> None:
        self.channel = channel
        self.execution_id = execution_id
        self.suspended = False  # the delivery's outcome went with a waiting step (`suspend`)
        self.offset = offset  # the store's clock less this box's (the launch says)

    def now(self) -> float:
        """The store's time (on PostgreSQL the server's): this box's plus the daemon's offset."""
        return time.time() + self.offset

    def save_step(self, key: str, step: StepWrite) -> bool | None:
        out = self.channel.call({"op": "step", "key": key, **_step_body(step)})
        return bool(out and out.get("cancel_requested"))

    def step_deadline(
        self, key: str, timeout: float, attempts: int, retry_delay: float | None
    ) -> None:
        """Announce the attempt's limit, pipelined: the daemon registers it before it reads
        the step's save (its answers keep the order of the requests); a refusal is raised at
        the next request."""
        self.channel.send(
            {
                "op": "deadline",
                "key": key,
                "timeout": timeout,
                "attempts": attempts,
                "retry_delay": retry_delay,
            }
        )

    def suspend(
        self,
        key: str,
        step: StepWrite,
        warnings: list[str] | None = None,
    ) -> None:
        """Record a waiting step and end the delivery `suspended`, both at once, pipelined:
        the workflow unwinds while the daemon commits them in one transaction, and `deliver`
        reads the answer before the worker exits (it reports no other outcome)."""
        sys.stdout.flush()  # its log is whole before the outcome is recorded
        sys.stderr.flush()
        self.channel.send(
            {
                "op": "suspend",
                "key": key,
                **_step_body(step),
                **({"warnings": warnings} if warnings else {}),
            }
        )
        self.suspended = True

    def start(self, key: str, workflow: str, params: Any, detached: bool) -> str:
        from ys.contract import check_start, request_params

        check_start(key, workflow)  # the client refuses what it cannot send
        # Encoded once, here: the store checks the canonical text, it does not encode again.
        out = self.channel.call(
            {
                "op": "start",
                "key": key,
                "workflow": workflow,
                "params_json": request_params(params),
                "detached": detached,
            }
        )
        return str(out["execution_id"])

    def get(self, execution_id: str) -> dict[str, Any]:
        out: dict[str, Any] = self.channel.call({"op": "get", "execution_id": execution_id})
        return out

    def effect_begin(self, operation: str, effect_id: str, input: Any, key: str) -> EffectStateJson:
        req = {"op": "effect_begin", "effect_id": effect_id, "operation": operation}
        out: EffectStateJson = self.channel.call(req | {"input": input, "step_key": key})
        return out

    def effect_settle(self, operation: str, effect_id: str, result: str) -> EffectStateJson:
        req = {"op": "effect_settle", "effect_id": effect_id, "operation": operation}
        out: EffectStateJson = self.channel.call(req | {"result": result})
        return out

    def effect_wait(self, effect_id: str, key: str, wake_at: float) -> float:
        req = {"op": "effect_wait", "effect_id": effect_id, "step_key": key, "wake_at": wake_at}
        return float(self.channel.call(req)["wake_at"])

    def value_wait(
        self, store_key: str, key: str, seen: int, timeout_at: float | None
    ) -> ValueFoundJson | None:
        req = {"op": "value_wait", "key": store_key, "step_key": key, "seen": seen}
        out: dict[str, ValueFoundJson | None] = self.channel.call(req | {"timeout_at": timeout_at})
        return out.get("found")


def make_step(backend: Any, state: dict[str, Any]) -> Any:
    """The Step of a delivery, from what GET /run returned (`ys step`'s)."""
    from ys.sdk import Step

    record = state["record"]
    steps = {
        s["key"]: StepWrite(s["kind"], s["status"], s.get("value"), s["attempts"], s.get("wake_at"))
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
        whole_run=False,  # one step per `ys step` process
    )


class Heartbeat:
    """Renews the delivery's lease every third of it, on a thread of its own, until the
    workflow ends; a lost lease ends the worker. A second thread ends the worker's process
    group once its daemon is gone (the channel's other end closed) or once the lease was not
    renewed before its end, measured on this process's monotonic clock (ys.guard). A spare
    starts both threads before its delivery comes (`warm_up`), so a delivery does not wait
    for a thread to start."""

    def __init__(self) -> None:
        self.channel: Any = None
        self.every = 10.0
        self.lease = 30.0
        self.until = 0.0  # when the worker stops itself unless renewed (time.monotonic())
        self.go = threading.Event()
        self.stop = threading.Event()
        # Not threading.Thread: its start() waits until the new thread has run, and a low-level
        # thread, like a daemon thread, does not hold up the exit.
        _thread.start_new_thread(self._run, ())
        _thread.start_new_thread(self._watch, ())

    def begin(self, channel: Any, lease_seconds: float, since: float | None = None) -> None:
        """Start renewing the lease of `lease_seconds` that was granted no earlier than
        `since` (time.monotonic(); None: now)."""
        from ys.guard import lease_end

        self.channel, self.lease = channel, lease_seconds
        self.every = max(0.2, lease_seconds / 3)
        self.until = lease_end(time.monotonic() if since is None else since, lease_seconds)
        self.go.set()

    def _run(self) -> None:
        # A renewal to a daemon that is gone fails (EPIPE), not ends the worker by SIGPIPE
        # before its watch ends the worker's group.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
        self.go.wait()
        _heartbeat(self, self.channel, self.every, self.stop)

    def renewed(self, sent: float) -> None:
        """A renewal sent at `sent` (time.monotonic()) was confirmed."""
        from ys.guard import lease_end

        self.until = max(self.until, lease_end(sent, self.lease))

    def _watch(self) -> None:
        from ys.guard import GONE, LAPSED, end_group, watch

        self.go.wait()
        # The lease is watched while the workflow runs; then the worker only reports its
        # outcome (the daemon renews for it from then on), and only the daemon's end matters.
        if watch(self.channel.fileno(), lambda: None if self.stop.is_set() else self.until):
            end_group(GONE)
        end_group(LAPSED)


def _heartbeat(beat: Heartbeat, channel: Any, every: float, stop: threading.Event) -> None:
    """Renew the lease every `every` seconds until `stop`; a lost lease ends the worker."""
    from ys.errors import LeaseLost, YsError
    from ys.worker.channel import ChannelClosed

    while not stop.wait(every):
        sent = time.monotonic()
        try:
            channel.call({"op": "lease"})
        except LeaseLost:
            sys.stderr.write("ys: this delivery lost its lease; stopping\n")
            sys.stderr.flush()
            os._exit(EXIT_RETRY)
        except (ChannelClosed, OSError):
            return  # the daemon is gone: the watch ends the worker's group
        except YsError:
            continue  # the daemon may be busy; the lease covers a few missed beats
        beat.renewed(sent)


def read_launch(sock: socket.socket) -> tuple[Any, Launch]:
    """The channel over `sock` and the launch the daemon wrote first on it."""
    from ys.worker.channel import Channel

    channel = Channel(sock)
    return channel, json.loads(channel.read_line())


WARM_UP = """\
import ys


@ys.workflow
def main(step, params):
    return [step.run("replayed", int), step.execution_id, params]
"""


_WARM_CODE: Any = None  # WARM_UP compiled: by the fork server once, before it forks


def prepare_warm_up() -> None:
    """Compile the warm-up's script once (the fork server's), so no spare compiles it."""
    global _WARM_CODE
    _WARM_CODE = compile(WARM_UP, "<ys warm-up>", "exec")


class _Replay:
    """The backend of the warm-up's workflow: its one step is history, nothing is saved."""

    def now(self) -> float:
        return time.time()


def warm_up() -> Heartbeat:
    """In a spare, before its delivery comes: go once through what a delivery goes through
    (a script read, hashed and its code run as a module, a step replayed, an outcome
    encoded, a launch decoded, output opened) with a script of its own, and start the
    heartbeat's thread. A forked child copies each page of the fork server that it writes
    to; this way it copies most of them while it waits, not between a trigger and the
    workflow's first line. Nothing is written."""
    import hashlib
    import marshal

    from ys import codec
    from ys.sdk import Step, run_workflow
    from ys.worker import codecache

    heartbeat = Heartbeat()
    try:
        # What codecache.compiled does for a script, minus its cache: nothing is written
        with open(codecache.__file__, "rb") as f:
            hashlib.sha256(f.read()).hexdigest()
        path = codecache.folder() / "warm-up.py"
        if _WARM_CODE is None:
            prepare_warm_up()
        code = marshal.loads(marshal.dumps(_WARM_CODE))
        fn = _run_module(str(path), lambda: code)
        sys.modules.pop("ys_workflow_warm_up", None)
        launch = json.loads(
            json.dumps({"steps": [["replayed", "run", "completed", "0", 1, None]], "params": "{}"})
        )
        steps = {s[0]: StepWrite(*s[1:]) for s in launch["steps"]}
        step = Step(
            _Replay(),  # type: ignore[arg-type]
            execution_id="warm-up",
            workflow="warm-up",
            context={},
            attempt=1,
            steps=steps,
        )
        outcome = run_workflow(fn, step, codec.decode(launch["params"]))
        json.dumps({"id": 1, "op": "outcome", "outcome": outcome}, separators=(",", ":"))
        os.fdopen(os.dup(2), "w", buffering=1).close()  # as the delivery's output is opened
    except Exception:  # noqa: BLE001 - only time is at stake: the delivery pays it instead
        pass
    return heartbeat


def deliver(channel: Any, launch: Launch, heartbeat: Heartbeat | None = None) -> int:
    """Run the delivery `launch` describes; the worker's exit status."""
    from ys import codec
    from ys.errors import REFUSALS, YsError
    from ys.sdk import InfrastructureFailure, Refused, Step, run_workflow

    execution_id = launch["execution_id"]
    backend = ChannelBackend(channel, execution_id, _offset(launch.get("clock_offset")))
    heartbeat = heartbeat or Heartbeat()
    heartbeat.begin(channel, launch["lease_seconds"], launch.get("lease_since"))
    steps = {s[0]: StepWrite(*s[1:]) for s in launch["steps"]}
    step = Step(
        backend,
        execution_id=execution_id,
        workflow=launch["workflow"],
        context=codec.plain(codec.decode(launch["context"])) if launch["context"] else {},
        attempt=launch["attempt"],
        steps=steps,
        cancel_requested=bool(launch["cancel_requested"]),
    )
    params = codec.decode(launch["params"])
    try:
        fn = load_script(launch["script"], launch.get("sha256"), launch.get("copy"))
        outcome = run_workflow(fn, step, params)
    except InfrastructureFailure as exc:
        sys.stderr.write(f"ys: {exc.code}: {exc.cause}; the delivery will be retried\n")
        return EXIT_RETRY
    except (ImportError, LookupError, SyntaxError) as exc:
        sys.stderr.write(f"ys: the script cannot be loaded: {type(exc).__name__}: {exc}\n")
        return EXIT_RETRY
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        heartbeat.stop.set()
    try:
        if backend.suspended and outcome["status"] == "suspended":
            try:
                channel.finish()  # its outcome went with the waiting step: read the answer
            except YsError as exc:
                if exc.code not in REFUSALS:
                    raise
                # The waiting step was refused for good (nothing of it committed): the
                # execution fails with that refusal, as any refused step request does.
                sys.stderr.write(f"ys: {exc.code}: {exc.message}; the execution fails\n")
                failed = Refused(exc, exc.code).outcome()
                channel.call({"op": "outcome", "outcome": failed})
        else:
            channel.call({"op": "outcome", "outcome": outcome})
    except (YsError, OSError) as exc:
        sys.stderr.write(f"ys: the outcome was not recorded: {exc}\n")
        return EXIT_RETRY
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--check"] and len(args) == 2:
        return check(args[1])
    fd = os.environ.get("YS_CHANNEL_FD")
    if not fd:
        sys.stderr.write("ys.worker: no channel (YS_CHANNEL_FD); the daemon starts workers\n")
        return 2
    sock = socket.socket(fileno=int(fd))
    os.set_inheritable(sock.fileno(), False)  # not for what the workflow starts
    try:
        channel, launch = read_launch(sock)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"ys: no delivery came over the channel: {exc}\n")
        return EXIT_RETRY
    return deliver(channel, launch)


if __name__ == "__main__":
    sys.exit(main())
