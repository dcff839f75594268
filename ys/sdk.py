"""The workflow SDK: `@ys.workflow`, `Step`, `Retry`, and the effect lookup results.

A workflow runs again from the top on every delivery; each finished step returns its saved
result instead of running again. A step that must wait (sleep, retry delay) records itself and
its wake, then ends the delivery by raising `Suspend`, which workflow code cannot catch.
"""

from __future__ import annotations

import builtins
import datetime as dt
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ys import codec
from ys.errors import (
    ChildWorkflowFailed,
    WaitTimeout,
    WorkflowCancelledError,
    WorkflowEffectError,
    WorkflowStartError,
    YsError,
    from_code,
)


def crash_point(name: str) -> None:
    """Fault injection for crash tests: YS_CRASH_POINTS="start.after_client@/tmp/marker,..."
    SIGKILLs this process at the named point (once per marker file, when one is given)."""
    spec = os.environ.get("YS_CRASH_POINTS")
    if not spec:
        return
    for item in spec.split(","):
        point, _, marker = item.partition("@")
        if point.strip() != name:
            continue
        if marker:
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except FileExistsError:
                return
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


class Suspend(BaseException):
    """Ends a delivery as `suspended`: the step and its wake are already recorded."""


class InfrastructureFailure(BaseException):
    """The runtime failed (socket, store, lease): no outcome, the delivery is retried.

    A BaseException so that `except Exception` in workflow code cannot swallow it (RFC 003).
    """

    def __init__(self, cause: BaseException, code: str = "INFRASTRUCTURE") -> None:
        super().__init__(f"{code}: {cause}")
        self.cause = cause
        self.code = code


@dataclass(frozen=True)
class Retry:
    """Durable retries for step.run: a failed attempt suspends and wakes after the interval."""

    max_attempts: int = 3
    interval: float = 1.0
    backoff: float = 2.0
    max_interval: float | None = None

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        d = self.interval * (self.backoff ** (attempt - 1))
        return min(d, self.max_interval) if self.max_interval is not None else d


@dataclass(frozen=True)
class Settled:
    result: Any


@dataclass(frozen=True)
class NotFound:
    pass


@dataclass(frozen=True)
class Unknown:
    pass


class _Failed:
    """A callback raised: its outcome is unknown."""


def workflow(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Mark the script's workflow function; options (schedule=, tz=, ...) are declarations."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        f.__ys_workflow__ = dict(options)  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


@dataclass
class SavedStep:
    kind: str
    status: str  # completed | failed | waiting
    value: str | None
    attempts: int
    wake_at: float | None


class Backend(Protocol):
    """What Step needs from the runtime: the daemon's API (worker) or a store (ys.testing)."""

    def now(self) -> float: ...

    def save_step(self, key: str, kind: str, status: str, value: str | None, attempts: int,
                  wake_at: float | None) -> bool | None:
        """Save a step (fenced); returns whether a cancellation is now requested."""

    def start(self, key: str, workflow: str, params: Any, detached: bool) -> str:
        """RFC 003's start; raises WorkflowStartError for a rejection, anything else is an
        infrastructure failure."""

    def get(self, execution_id: str) -> dict[str, Any]:
        """A record as the API shows it (status, outcome)."""

    def effect_begin(self, operation: str, effect_id: str, input: Any,
                     key: str) -> dict[str, Any]:
        """RFC 004 begin: {"status": "new" | "pending" | "settled", "result"?: canonical};
        raises WorkflowEffectError for a rejection."""

    def effect_settle(self, operation: str, effect_id: str, result: str) -> dict[str, Any]:
        """RFC 004 settle: {"status": "settled" | "conflict", "result", ...} (canonical)."""

    def effect_wait(self, effect_id: str, key: str, wake_at: float) -> float:
        """RFC 004 wait: register as a waiter and request the wake; returns the wake time."""

    def store_wait(self, store_key: str, key: str, seen: int,
                   timeout_at: float | None) -> dict[str, Any] | None:
        """The store key's {"value": canonical, "version"} if above `seen`, else register this
        step as a waiter (and its timeout wake) and return None, in one transaction."""


_REVIVED: dict[str, type[BaseException]] = {}


def revive(error: codec.ErrorValue) -> BaseException:
    """An exception of the saved class when it is a builtin or a ys error, else a look-alike
    class with the same name (so a failed outcome names the original error)."""
    if error.code and error.name in ("ExecutionAdmissionError", "WorkflowStartError",
                                     "WorkflowEffectError", "YsError", "LeaseLost", "NotFound"):
        return from_code(error.code, error.message)
    if error.name == "WaitTimeout":
        return WaitTimeout("WAIT_TIMEOUT", error.message)
    cls = getattr(builtins, error.name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(error.message)
        except TypeError:
            pass
    made = _REVIVED.get(error.name)
    if made is None:
        made = type(error.name, (YsError,), {})
        _REVIVED[error.name] = made
    exc = made.__new__(made)
    YsError.__init__(exc, error.code or "STEP_FAILED", error.message)  # type: ignore[arg-type]
    exc.args = (error.message,)
    return exc


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    value = fn(*args)
    if isinstance(value, Awaitable):
        import asyncio  # only for async step functions: asyncio costs ~30 ms to import

        async def _await() -> Any:
            return await value

        return asyncio.run(_await())
    return value


class Step:
    """The handle a workflow gets: step.run, step.sleep, and (later issues) start/effect/wait."""

    def __init__(self, backend: Backend, *, execution_id: str, workflow: str,
                 context: dict[str, Any], attempt: int, steps: dict[str, SavedStep],
                 cancel_requested: bool = False) -> None:
        self._backend = backend
        self.execution_id = execution_id
        self.workflow = workflow
        self.context = context
        self.attempt = attempt
        self._saved = steps
        self._used: set[str] = set()
        self._cancel_requested = cancel_requested
        self._cancel_raised = False

    # -- helpers ----------------------------------------------------------------------------

    def _begin(self, key: str) -> SavedStep | None:
        if not isinstance(key, str) or not key:
            raise ValueError("a step key must be non-empty text")
        if key in self._used:
            raise YsError("DUPLICATE_STEP_KEY", f"step key {key!r} is used twice in one run")
        self._used.add(key)
        saved = self._saved.get(key)
        finished = saved is not None and saved.status in ("completed", "failed")
        if self._cancel_requested and not self._cancel_raised and not finished:
            # Raised once, at the first step that is not history; steps the workflow then
            # runs to clean up work as usual.
            self._cancel_raised = True
            raise WorkflowCancelledError("CANCELLED", f"{self.execution_id} was cancelled")
        return saved

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested

    def _infra(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call the runtime; its failures are infrastructure failures, never workflow errors."""
        try:
            return fn(*args)
        except (WorkflowStartError, WorkflowEffectError):
            raise
        except (YsError, OSError) as exc:
            raise InfrastructureFailure(exc, getattr(exc, "code", "INFRASTRUCTURE")) from exc

    def _save(self, key: str, kind: str, status: str, value: str | None, attempts: int = 1,
              wake_at: float | None = None) -> None:
        cancel = self._infra(self._backend.save_step, key, kind, status, value, attempts, wake_at)
        self._saved[key] = SavedStep(kind, status, value, attempts, wake_at)
        if cancel:
            self._cancel_requested = True

    def _suspend(self, key: str, kind: str, value: str | None, attempts: int,
                 wake_at: float) -> None:
        self._save(key, kind, "waiting", value, attempts, wake_at)
        raise Suspend(key)

    # -- steps ------------------------------------------------------------------------------

    def run(self, key: str, fn: Callable[..., Any], *args: Any, retry: Retry | None = None) -> Any:
        """Run fn(*args) once and save its result; an exception is saved and raised on replay."""
        saved = self._begin(key)
        attempts = 0
        if saved is not None:
            if saved.status == "completed":
                return codec.decode(saved.value) if saved.value is not None else None
            if saved.status == "failed":
                raise revive(codec.decode(saved.value or "null"))
            attempts = saved.attempts  # a retry is waiting
            if saved.wake_at is not None and self._backend.now() < saved.wake_at:
                self._suspend(key, "run", saved.value, attempts, saved.wake_at)
        attempts += 1
        try:
            result = _call(fn, args)
        except Exception as exc:
            error = codec.ErrorValue.from_exception(exc)
            text = codec.dumps(error)
            if retry is not None and attempts < retry.max_attempts:
                self._suspend(key, "run", text, attempts, self._backend.now() + retry.delay(attempts))
            self._save(key, "run", "failed", text, attempts)
            raise
        enc = codec.encode(result, path=f"step {key!r} result")
        if enc.status != "encoded":
            raise TypeError(enc.message)
        self._save(key, "run", "completed", enc.canonical, attempts)
        return result

    def sleep(self, key: str, seconds: float) -> None:
        """A durable timer: the step and its wake are recorded, the delivery ends, and the
        execution is delivered again when due."""
        saved = self._begin(key)
        now = self._backend.now()
        if saved is not None:
            if saved.status == "completed":
                return
            wake_at = saved.wake_at if saved.wake_at is not None else now
        else:
            if seconds < 0 or seconds != seconds:
                raise ValueError(f"step.sleep({key!r}): seconds must be >= 0, not {seconds}")
            wake_at = now + seconds
        if now >= wake_at:
            self._save(key, "sleep", "completed", None, 1, wake_at)
            return
        self._suspend(key, "sleep", None, 1, wake_at)

    def sleep_until(self, key: str, when: dt.datetime | float) -> None:
        """Sleep until an absolute time (an aware datetime, or epoch seconds)."""
        if isinstance(when, dt.datetime):
            if when.tzinfo is None:
                raise ValueError("step.sleep_until needs an aware datetime (with a time zone)")
            target = when.timestamp()
        else:
            target = float(when)
        saved = self._saved.get(key)
        now = self._backend.now()
        self.sleep(key, max(0.0, target - now) if saved is None else 0.0)


    # -- waiting for a value -----------------------------------------------------------------

    def wait_for(self, key: str, store_key: str, timeout: float | None = None,
                 newer_than: int = 0) -> Any:
        """Wait until `store_key` holds a value (at a version above `newer_than`) and return
        it; with a timeout, raise ys.WaitTimeout once it passes. Durable: the execution
        suspends while it waits, and a put that lands meanwhile is never missed."""
        saved = self._begin(key)
        if saved is not None and saved.status == "completed":
            return codec.decode(saved.value or "null")
        if saved is not None and saved.status == "failed":
            raise revive(codec.decode(saved.value or "null"))
        now = self._backend.now()
        if saved is not None:
            info = codec.decode(saved.value or "{}")
            seen, timeout_at = int(info.get("seen", 0)), info.get("timeout_at")
        else:
            if timeout is not None and (timeout != timeout or timeout < 0):
                raise ValueError(f"step.wait_for({key!r}): timeout must be >= 0")
            seen, timeout_at = newer_than, (None if timeout is None else now + timeout)
        found = self._infra(self._backend.store_wait, store_key, key, seen, timeout_at)
        if found is not None:
            self._save(key, "wait", "completed", found["value"])
            return codec.decode(found["value"])
        if timeout_at is not None and now >= timeout_at:
            error = codec.ErrorValue("WaitTimeout", f"no value for {store_key!r} within "
                                     f"{timeout}s" if timeout is not None else
                                     f"no value for {store_key!r} in time", "WAIT_TIMEOUT")
            self._save(key, "wait", "failed", codec.dumps(error))
            raise WaitTimeout("WAIT_TIMEOUT", error.message)
        info = {"store_key": store_key, "seen": seen, "timeout_at": timeout_at}
        self._save(key, "wait", "waiting", codec.dumps(info), 1, timeout_at)
        raise Suspend(key)

    # -- external effects (RFC 004) ---------------------------------------------------------

    def effect(self, key: str, *, effect_id: str, operation: str, input: dict[str, Any],
               perform: Callable[[str], Any], lookup: Callable[[str], Any],
               retry_in: float = 60.0) -> Any:
        """Perform an external operation at most once per effect ID, asking `lookup` what
        happened after any uncertain attempt (RFC 004's driver table)."""
        saved = self._begin(key)
        if saved is not None and saved.status == "completed":
            return codec.decode(saved.value or "null")
        if saved is not None and saved.status == "failed":
            raise revive(codec.decode(saved.value or "null"))
        try:
            from ys.store.base import check_request

            check_request(effect_id, operation, input, retry_in)
            if not callable(perform) or not callable(lookup):
                raise WorkflowEffectError("INVALID_EFFECT_REQUEST",
                                          "perform and lookup must be callables")
            state = self._effect_call(self._backend.effect_begin, operation, effect_id, input, key)
        except WorkflowEffectError as exc:
            error = codec.ErrorValue("WorkflowEffectError", exc.message, exc.code)
            self._save(key, "effect", "failed", codec.dumps(error))
            raise
        crash_point("effect.after_begin")
        if not isinstance(state, dict) or state.get("status") not in ("new", "pending",
                                                                      "settled"):
            # Never perform on an answer the driver cannot read.
            from ys.errors import EffectInvariantError

            raise InfrastructureFailure(EffectInvariantError(
                "EFFECT_RUNTIME_INVARIANT", f"effect begin answered {state!r}"),
                "EFFECT_RUNTIME_INVARIANT")
        if state["status"] == "settled":
            return self._effect_done(key, state.get("result"))
        result_json: str | None = None
        if state["status"] == "pending":
            found = self._callback(lookup, effect_id, "lookup")
            crash_point("effect.after_lookup")
            if isinstance(found, Settled):
                result_json = self._durable(found.result, "lookup")
            elif isinstance(found, NotFound):
                found = None
            elif isinstance(found, Unknown | _Failed):
                return self._effect_wait(key, effect_id, retry_in)
            else:
                raise InfrastructureFailure(
                    TypeError(f"lookup returned {type(found).__name__}, not Settled, NotFound "
                              "or Unknown"), "EFFECT_HANDLER_INVALID")
        if result_json is None:
            performed = self._callback(perform, effect_id, "perform")
            crash_point("effect.after_perform")
            if isinstance(performed, _Failed):
                return self._effect_wait(key, effect_id, retry_in)
            result_json = self._durable(performed, "perform")
        settled = self._effect_call(self._backend.effect_settle, operation, effect_id, result_json)
        crash_point("effect.after_settle")
        if not isinstance(settled, dict) or settled.get("status") not in ("settled", "conflict"):
            from ys.errors import EffectInvariantError

            raise InfrastructureFailure(EffectInvariantError(
                "EFFECT_RUNTIME_INVARIANT", f"effect settle answered {settled!r}"),
                "EFFECT_RUNTIME_INVARIANT")
        if settled["status"] == "conflict":
            sys.stderr.write(
                f"ys: EFFECT_CONFLICT: effect {effect_id!r} was already settled with another "
                "result; the first result is kept and the conflict is reported (ys effect "
                f"{effect_id})\n")
        return self._effect_done(key, settled.get("result"))

    def _effect_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """An effect client call: a rejection passes through; any other failure is
        EFFECT_CLIENT_UNAVAILABLE (or the invariant code), never a workflow error."""
        try:
            return fn(*args)
        except WorkflowEffectError:
            raise
        except YsError as exc:
            code = exc.code if exc.code == "EFFECT_RUNTIME_INVARIANT" else (
                "EFFECT_CLIENT_UNAVAILABLE")
            raise InfrastructureFailure(exc, code) from exc
        except Exception as exc:
            raise InfrastructureFailure(exc, "EFFECT_CLIENT_UNAVAILABLE") from exc

    @staticmethod
    def _callback(fn: Callable[[str], Any], effect_id: str, what: str) -> Any:
        """A perform or lookup call; a raising callback is an unknown outcome."""
        try:
            return _call(fn, (effect_id,))
        except Exception as exc:
            sys.stderr.write(f"ys: {what} for effect {effect_id!r} raised "
                             f"{type(exc).__name__}: {exc}; its outcome is unknown\n")
            return _Failed()

    @staticmethod
    def _durable(value: Any, what: str) -> str:
        enc = codec.encode(value, path=f"{what} result")
        if enc.status != "encoded" or enc.canonical is None:
            raise InfrastructureFailure(ValueError(enc.message), "EFFECT_HANDLER_INVALID")
        return enc.canonical

    def _effect_done(self, key: str, result_json: Any) -> Any:
        """Record the settled result; text the client sent that is not a durable value is a
        runtime invariant (checked before it is recorded, so replay never reads it)."""
        try:
            result = codec.decode(result_json)
        except (TypeError, ValueError) as exc:
            from ys.errors import EffectInvariantError

            raise InfrastructureFailure(EffectInvariantError(
                "EFFECT_RUNTIME_INVARIANT", f"the effect client's result is not durable: {exc}"),
                "EFFECT_RUNTIME_INVARIANT") from exc
        self._save(key, "effect", "completed", result_json)
        return result

    def _effect_wait(self, key: str, effect_id: str, retry_in: float) -> Any:
        """Register as a waiter (the wake comes with it), then record the unfinished step."""
        wake_at = self._effect_call(self._backend.effect_wait, effect_id, key,
                                    self._backend.now() + retry_in)
        crash_point("effect.after_wait")
        self._save(key, "effect", "waiting", None, 1, float(wake_at))
        raise Suspend(key)

    # -- children (RFC 003) -----------------------------------------------------------------

    def _request(self, key: str, kind: str, workflow: str, params: Any,
                 saved: SavedStep | None) -> str | None:
        """The child a recorded start step names, after checking the request is unchanged;
        None when nothing is recorded. A recorded rejection is raised again."""
        if saved is None:
            return None
        if saved.status == "failed" and saved.kind == "start":
            # A recorded rejection (of a start or of a call's start): the same class and code,
            # whatever the code (revive would turn INVALID_ARGUMENT into InvalidArgument).
            rejected = codec.decode(saved.value or "null")
            if isinstance(rejected, codec.ErrorValue) and rejected.name == "WorkflowStartError":
                raise WorkflowStartError(rejected.code or "START_REQUEST_MISMATCH",
                                         rejected.message)
            raise revive(rejected)
        info = codec.decode(saved.value or "null")
        if isinstance(info, dict) and "request" in info:
            info = info["request"]
        from ys.store.base import request_params

        asked = request_params(params)
        if not isinstance(info, dict) or info.get("workflow") != workflow or info.get(
            "params"
        ) != asked:
            raise WorkflowStartError(
                "START_REQUEST_MISMATCH",
                f"step {key!r} already started {info.get('workflow') if isinstance(info, dict) else '?'}"
                " with a different request; the code changed after the step was recorded",
            )
        return str(info["execution_id"])

    def _start(self, key: str, kind: str, workflow: str, params: Any, detached: bool) -> str:
        """Call the start client; a rejection is recorded and raised as WorkflowStartError."""
        try:
            return str(self._infra(self._backend.start, key, workflow, params, detached))
        except WorkflowStartError as exc:
            error = codec.ErrorValue("WorkflowStartError", exc.message, exc.code)
            self._save(key, "start", "failed", codec.dumps(error))
            raise
        except Exception as exc:
            # Whatever else the client throws is not the workflow's to catch (RFC 003).
            raise InfrastructureFailure(exc) from exc

    def start(self, key: str, workflow: str, params: dict[str, Any] | None = None,
              detached: bool = False) -> str:
        """Start a child workflow once, however often this step replays; returns its ID."""
        saved = self._begin(key)
        child = self._request(key, "start", workflow, params, saved)
        if child is not None:
            return child
        child = self._start(key, "start", workflow, params, detached)
        crash_point("start.after_client")
        from ys.store.base import request_params

        info = {"execution_id": child, "workflow": workflow, "params": request_params(params)}
        self._save(key, "start", "completed", codec.dumps(info))
        return child

    def call(self, key: str, workflow: str, params: dict[str, Any] | None = None) -> Any:
        """Start a child (as step.start) and wait for its outcome: its result, or
        ChildWorkflowFailed. The wait is durable: the execution suspends until the child ends."""
        saved = self._begin(key)
        if saved is not None and saved.kind != "start" and saved.status in ("completed", "failed"):
            # (a recorded rejection of this call's start has kind "start": _request raises it)
            self._request(key, "call", workflow, params, saved)  # the same request, or mismatch
            value = codec.decode(saved.value or "null")
            if saved.status == "failed":
                raise _child_failed(value)
            return value.get("result") if isinstance(value, dict) else None
        child = self._request(key, "call", workflow, params, saved)
        if child is None:
            child = self._start(key, "call", workflow, params, False)
            crash_point("call.after_client")
        from ys.store.base import request_params

        request = {"execution_id": child, "workflow": workflow, "params": request_params(params)}
        record = self._infra(self._backend.get, child)
        outcome = record.get("outcome")
        if record.get("status") not in ("completed", "failed", "cancelled") or outcome is None:
            self._save(key, "call", "waiting", codec.dumps({"request": request}))
            raise Suspend(key)
        if outcome["status"] == "completed":
            value = {"request": request, "result": outcome.get("result")}
            self._save(key, "call", "completed", codec.dumps(value))
            return outcome.get("result")
        error = outcome.get("error") or {
            "name": "WorkflowCancelledError", "message": f"child {child} was cancelled"
        }
        failed = {"request": request, "child": child, "name": error.get("name", "Error"),
                  "message": error.get("message", "")}
        self._save(key, "call", "failed", codec.dumps(failed))
        raise _child_failed(failed)


def _child_failed(value: Any) -> ChildWorkflowFailed:
    v = value if isinstance(value, dict) else {}
    child = str(v.get("child") or (v.get("request") or {}).get("execution_id", ""))
    name = str(v.get("name", "Error"))
    message = str(v.get("message", ""))
    return ChildWorkflowFailed(f"child {child} failed: {name}: {message}", child_id=child,
                               name=name, child_message=message)


def find_workflow(namespace: dict[str, Any]) -> Callable[..., Any] | None:
    """The function marked @ys.workflow, or failing that, one named `main`."""
    for value in namespace.values():
        if callable(value) and hasattr(value, "__ys_workflow__"):
            return value
    main = namespace.get("main")
    return main if callable(main) else None


def run_workflow(fn: Callable[..., Any], step: Step, params: Any) -> dict[str, Any]:
    """Call the workflow and turn how it ended into a WorkflowRunOutcome (RFC 003).

    InfrastructureFailure propagates: it is not an outcome."""
    try:
        result = fn(step, params)
        if isinstance(result, Awaitable):
            raise TypeError("a workflow function must be a plain function, not async")
    except Suspend:
        return {"status": "suspended"}
    except WorkflowCancelledError:
        if step._cancel_requested:
            return {"status": "cancelled"}
        raise
    except InfrastructureFailure:
        raise
    except Exception as exc:
        import traceback

        traceback.print_exception(exc)  # into the delivery's log; the outcome keeps name+message
        return {"status": "failed", "error": error_json(exc)}
    enc = codec.encode(result, path="result")
    if enc.status != "encoded":
        return {"status": "failed", "error": {"name": "TypeError", "message": enc.message}}
    return {"status": "completed", "result": codec.decode(enc.canonical or "null")}


def error_json(exc: BaseException) -> dict[str, Any]:
    message = exc.message if isinstance(exc, YsError) else str(exc)
    out: dict[str, Any] = {"name": type(exc).__name__, "message": message}
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        out["code"] = code
    return out
