"""The workflow SDK: `@ys.workflow`, `Step`, `Retry`, and the effect lookup results.

A workflow runs again from the top on every delivery; each finished step returns its saved
result instead of running again. A step that must wait (sleep, retry delay) records itself and
its wake, then ends the delivery by raising `Suspend`, which workflow code cannot catch.
"""

from __future__ import annotations

import builtins
import datetime as dt
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, cast

from ys import codec, runenv, tracing
from ys._steps.children import ChildSteps
from ys._steps.effects import EffectSteps
from ys._steps.times import checked_wake, wake_after, wake_time
from ys._steps.values import ValueSteps
from ys.crashpoints import crash_point as crash_point  # the steps call sdk.crash_point
from ys.errors import (
    REFUSALS,
    StepTimeout,
    ValueTooLarge,
    WaitTimeout,
    WorkflowCancelledError,
    WorkflowEffectError,
    WorkflowStartError,
    YsError,
    from_code,
)
from ys.values import (
    EffectStateJson,
    OutcomeErrorJson,
    OutcomeJson,
    StepWrite,
    ValueFoundJson,
)


class Suspend(BaseException):
    """Ends a delivery as `suspended`: the step and its wake are already recorded."""


class InfrastructureFailure(BaseException):
    """The runtime failed (socket, store, lease): no outcome, the delivery is retried.

    A BaseException so that `except Exception` in workflow code cannot swallow it.
    """

    def __init__(self, cause: BaseException, code: str = "INFRASTRUCTURE") -> None:
        super().__init__(f"{code}: {cause}")
        self.cause = cause
        self.code = code


class Refused(InfrastructureFailure):
    """The runtime refused a request for good (a bad argument the daemon found): no delivery
    could change it, so the execution fails with it at once. Like its base, workflow code
    cannot catch it. (An invalid effect callback result is not one: it asks for another
    delivery, as a fixed callback may answer.)"""

    def outcome(self) -> OutcomeJson:
        cause = self.cause
        message = cause.message if isinstance(cause, YsError) else str(cause)
        error: OutcomeErrorJson = {
            "name": type(cause).__name__,
            "message": codec.clip(message),
            "code": self.code,
        }
        return {"status": "failed", "error": error}


def refusal(exc: BaseException, code: str | None = None) -> InfrastructureFailure:
    """The runtime's error `exc` as what ends the delivery: Refused for a code in
    ys.errors.REFUSALS, else an InfrastructureFailure (retried)."""
    code = code or getattr(exc, "code", None) or "INFRASTRUCTURE"
    return (Refused if code in REFUSALS else InfrastructureFailure)(exc, code)


@dataclass(frozen=True)
class Retry:
    """Durable retries for step.run: a failed attempt suspends and wakes after the interval."""

    max_attempts: int = 3
    interval: float = 1.0
    backoff: float = 2.0
    max_interval: float | None = None

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or (self.max_attempts < 1)
        ):
            raise ValueError(
                f"Retry: max_attempts must be a whole number >= 1, not {self.max_attempts!r}"
            )
        for name in ("interval", "backoff", "max_interval"):
            value = getattr(self, name)
            if name == "max_interval" and value is None:
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (0 <= value < float("inf"))
            ):
                raise ValueError(f"Retry: {name} must be a finite number >= 0, not {value!r}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        d = self.interval * (self.backoff ** (attempt - 1))
        return min(d, self.max_interval) if self.max_interval is not None else d


# What an effect's `lookup` answers: the operation happened (with its result), it
# did not, or nobody can tell yet.


@dataclass(frozen=True)
class Settled:
    """An effect's `lookup` answer: the operation happened, with this result (a durable
    value), which the step records and returns; `perform` does not run."""

    result: Any


@dataclass(frozen=True)
class NotFound:
    """An effect's `lookup` answer: the operation did not happen, so `perform` runs. Not an
    exception: a missing record (a 404 from ys.Client) is ys.NotFoundError."""


@dataclass(frozen=True)
class Unknown:
    """An effect's `lookup` answer: nobody can tell yet whether the operation happened; the
    step waits (`retry_in` seconds, durably) and asks `lookup` again."""


def workflow(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Mark the script's workflow function; options (schedule=, tz=, ...) are declarations."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        f.__ys_workflow__ = dict(options)  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


class Backend(Protocol):
    """What Step needs from the runtime: the daemon's API (worker) or a store (ys.testing)."""

    def now(self) -> float: ...

    def save_step(self, key: str, step: StepWrite) -> bool | None:
        """Save a step (fenced); returns whether a cancellation is now requested."""

    def start(self, key: str, workflow: str, params: Any, detached: bool) -> str:
        """A child start; raises WorkflowStartError for a rejection, anything else is an
        infrastructure failure."""

    def get(self, execution_id: str) -> dict[str, Any]:
        """A record as the API shows it (status, outcome)."""

    def effect_begin(self, operation: str, effect_id: str, input: Any, key: str) -> EffectStateJson:
        """Effect begin: {"status": "new" | "pending" | "settled", "result"?: canonical};
        raises WorkflowEffectError for a rejection."""

    def effect_settle(self, operation: str, effect_id: str, result: str) -> EffectStateJson:
        """Effect settle: {"status": "settled" | "conflict", "result", ...} (canonical)."""

    def effect_wait(self, effect_id: str, key: str, wake_at: float) -> float:
        """Effect wait: register as a waiter and request the wake; returns the wake time."""

    def value_wait(
        self, store_key: str, key: str, seen: int, timeout_at: float | None
    ) -> ValueFoundJson | None:
        """The store key's {"value": canonical, "version"} if above `seen`, else register this
        step as a waiter (and its timeout wake) and return None, in one transaction."""


_REVIVED: dict[str, type[BaseException]] = {}


def revive(error: codec.ErrorValue) -> BaseException:
    """An exception of the saved class when it is a builtin or a ys error, else a look-alike
    class with the same name (so a failed outcome names the original error)."""
    if error.code and error.name in (
        "ExecutionAdmissionError",
        "WorkflowStartError",
        "WorkflowEffectError",
        "YsError",
        "LeaseLost",
        "NotFoundError",
        "NotFound",
    ):  # NotFound: its old name
        return from_code(error.code, error.message)
    if error.name == "WaitTimeout":
        return WaitTimeout("WAIT_TIMEOUT", error.message)
    if error.name == "StepTimeout":
        return StepTimeout("STEP_TIMEOUT", error.message)
    if error.name == "ValueTooLarge":
        return ValueTooLarge(error.code or "INVALID_ARGUMENT", error.message)
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


class Step(ChildSteps, EffectSteps, ValueSteps):
    """The handle a workflow gets: step.run and step.sleep here; step.start and step.call,
    step.effect and step.wait_for come from the mixins in ys/_steps/."""

    def __init__(
        self,
        backend: Backend,
        *,
        execution_id: str,
        workflow: str,
        context: dict[str, Any],
        attempt: int,
        steps: dict[str, StepWrite],
        cancel_requested: bool = False,
        whole_run: bool = True,
    ) -> None:
        """`whole_run`: this Step sees the whole run of the workflow (False for `ys step`,
        one step per process, where reaching every recorded key is not this Step's to see)."""
        self._backend = backend
        self.execution_id = execution_id
        self.workflow = workflow
        self.context = context
        self.attempt = attempt
        self._saved = steps
        self._used: set[str] = set()
        self._cancel_requested = cancel_requested
        self._cancel_raised = False
        self._suspended: str | None = None  # the step whose suspension ends this delivery
        self._recorded = tuple(steps)  # the keys recorded before this delivery, in order
        self._drift_warned = not whole_run
        self._auto: dict[str, int] = {}  # step.now/uuid/random calls without a key, by kind
        # What this delivery warned of, recorded with its outcome (`describe` shows them).
        self.warnings: list[str] = []

    # -- helpers ----------------------------------------------------------------------------

    def _begin(self, key: str) -> StepWrite | None:
        if self._suspended is not None:
            # The suspension was caught (a bare `except:`): the delivery has ended already.
            raise Suspend(self._suspended)
        if not isinstance(key, str) or not key:
            raise ValueError("a step key must be non-empty text")
        if key in self._used:
            raise YsError("DUPLICATE_STEP_KEY", f"step key {key!r} is used twice in one run")
        self._used.add(key)
        saved = self._saved.get(key)
        if saved is None and not self._drift_warned and len(self._used) <= len(self._recorded) + 1:
            self._warn_drift(key)
        finished = saved is not None and saved.status in ("completed", "failed")
        if self._cancel_requested and not self._cancel_raised and not finished:
            # Raised once, at the first step that is not history; steps the workflow then
            # runs to clean up work as usual.
            self._cancel_raised = True
            raise WorkflowCancelledError("CANCELLED", f"{self.execution_id} was cancelled")
        return saved

    def _warn_drift(self, key: str) -> None:
        """A new key while recorded ones were never reached in this delivery: most often a
        key made of something that changes each run (a uuid, a time), whose step then runs
        again on every delivery. Said once per delivery, in its log."""
        unreached = [k for k in self._recorded if k not in self._used]
        if not unreached:
            return
        self._drift_warned = True
        shown = ", ".join(repr(k) for k in unreached[:3]) + (", ..." if len(unreached) > 3 else "")
        said = (
            f"step {key!r} is new in this replay, but recorded steps ({shown}) "
            "were not reached: a non-deterministic step key (a uuid, a time, a random "
            "number) runs its step again on every delivery; make keys from params or from "
            "step.uuid(), step.now(), step.random(), which are recorded once"
        )
        self.warnings.append(said)
        sys.stderr.write(f"ys: warning: {said}\n")

    # -- recorded values: the same on every replay --------------------------------------------

    def now(self, key: str | None = None) -> float:
        """The current time (epoch seconds), recorded once like a step: every replay gets the
        same value (Temporal's workflow.now()). Without a key, the n-th call of the run."""
        return float(self._recorded_value(key, "now", self._backend.now))

    def uuid(self, key: str | None = None) -> str:
        """A random UUID (text), recorded once like a step: the same on every replay."""
        import uuid

        return str(self._recorded_value(key, "uuid", lambda: str(uuid.uuid4())))

    def random(self, key: str | None = None) -> float:
        """A random float in [0, 1), recorded once like a step: the same on every replay."""
        import random

        return float(self._recorded_value(key, "random", random.random))

    def _recorded_value(self, key: str | None, what: str, make: Callable[[], Any]) -> Any:
        if key is None:
            n = self._auto[what] = self._auto.get(what, 0) + 1
            key = f"ys.{what}.{n}"
        saved = self._begin(key)
        if saved is not None and saved.status == "completed" and saved.value is not None:
            return codec.decode(saved.value)
        value = make()
        self._save(key, "run", "completed", codec.dumps(value))
        return value

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
            raise refusal(exc) from exc

    def _save(
        self,
        key: str,
        kind: str,
        status: str,
        value: str | None,
        attempts: int = 1,
        wake_at: float | None = None,
    ) -> None:
        step = StepWrite(kind, status, value, attempts, wake_at)
        cancel = self._infra(self._backend.save_step, key, step)
        self._saved[key] = step
        if cancel:
            self._cancel_requested = True

    def _suspend(
        self, key: str, kind: str, value: str | None, attempts: int, wake_at: float
    ) -> None:
        suspend = getattr(self._backend, "suspend", None)
        if suspend is None:  # save the step, then report the suspension (ys.testing, ys step)
            self._save(key, kind, "waiting", value, attempts, wake_at)
        else:  # both at once (a worker's channel: one transaction, no wait between)
            step = StepWrite(kind, "waiting", value, attempts, wake_at)
            self._infra(suspend, key, step, self.warnings)
            self._saved[key] = step
        self._stop(key)

    def _stop(self, key: str) -> NoReturn:
        """End the delivery suspended: step `key` is recorded waiting, with its wake."""
        self._suspended = key
        raise Suspend(key)

    # -- steps ------------------------------------------------------------------------------

    def run(
        self,
        key: str,
        fn: Callable[..., Any],
        *args: Any,
        retry: Retry | None = None,
        timeout: float | str | None = None,
    ) -> Any:
        """Run fn(*args) once and save its result; an exception is saved and raised on replay.
        `timeout` (seconds, or text like "10m"): the daemon kills an attempt that runs longer
        (its whole worker) and records it failed with ys.StepTimeout, which `retry` retries."""
        if retry is not None and not isinstance(retry, Retry):
            raise TypeError(
                f"step.run({key!r}): retry must be a ys.Retry (e.g. retry=ys.Retry("
                f"max_attempts=5)), not {type(retry).__name__} {retry!r}"
            )
        limit = step_timeout(timeout, f"step.run({key!r}): timeout")
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
        if limit is not None:
            self._announce(key, limit, attempts, retry)
        try:
            with tracing.step_context(key, attempts):
                result = _call(fn, args)
        except Exception as exc:
            error = codec.ErrorValue.from_exception(exc)
            text = codec.dumps(error)
            if retry is not None and attempts < retry.max_attempts:
                now = self._backend.now()
                try:
                    delay = retry.delay(attempts)
                except OverflowError:  # interval * backoff ** attempts past any float
                    delay = float("inf")
                try:
                    wake = checked_wake(f"step.run({key!r}): the retry delay", now, delay)
                except ValueError as refused:
                    raise refused from exc  # the step's own failure stays in the traceback
                self._suspend(key, "run", text, attempts, wake)
            self._save(key, "run", "failed", text, attempts)
            raise
        try:
            canonical = _savable(result, f"step {key!r} result")
        except (TypeError, ValueTooLarge) as exc:
            # A result that cannot be saved is the step's failure, recorded once and raised
            # here (running the step again would give the same value).
            text = codec.dumps(codec.ErrorValue.from_exception(exc))
            self._save(key, "run", "failed", text, attempts)
            raise
        self._save(key, "run", "completed", canonical, attempts)
        return result

    def _announce(self, key: str, limit: float, attempts: int, retry: Retry | None) -> None:
        """Tell the daemon this attempt's limit before its body runs, and what to record if it
        kills the attempt: a retry after the policy's delay, or the step's failure."""
        announce = getattr(self._backend, "step_deadline", None)
        if announce is None:  # a backend without a daemon (ys.testing): nothing can kill
            return
        delay = None
        if retry is not None and attempts < retry.max_attempts:
            try:
                delay = retry.delay(attempts)
            except OverflowError:
                delay = None
        self._infra(announce, key, limit, attempts, delay)

    def sleep(self, key: str, seconds: float) -> None:
        """A durable timer: the step and its wake are recorded, the delivery ends, and the
        execution is delivered again when due. ValueError for seconds that are negative,
        not finite, or past the year 9999."""
        now = self._backend.now()
        wake = wake_after(f"step.sleep({key!r}): seconds", now, seconds)  # checked on replay too
        saved = self._begin(key)
        self._sleep(key, saved, now, None if saved is not None else wake)

    def sleep_until(self, key: str, when: dt.datetime | float) -> None:
        """Sleep until an absolute time (an aware datetime, or epoch seconds in 1970..9999)."""
        if isinstance(when, dt.datetime):
            if when.tzinfo is None:
                raise ValueError("step.sleep_until needs an aware datetime (with a time zone)")
            target = when.timestamp()
        elif isinstance(when, bool) or not isinstance(when, int | float):
            raise TypeError(
                f"step.sleep_until({key!r}) needs a datetime or epoch seconds, "
                f"not {type(when).__name__}"
            )
        else:
            target = when
        target = wake_time(f"step.sleep_until({key!r}): the time", target)
        saved = self._begin(key)
        now = self._backend.now()
        self._sleep(key, saved, now, None if saved is not None else max(now, target))

    def _sleep(self, key: str, saved: StepWrite | None, now: float, wake: float | None) -> None:
        """Complete the sleep once its wake has come, else record it and suspend; a saved
        sleep keeps the wake it was first given."""
        if saved is not None:
            if saved.status == "completed":
                return
            wake = saved.wake_at if saved.wake_at is not None else now
        assert wake is not None
        if now >= wake:
            self._save(key, "sleep", "completed", None, 1, wake)
            return
        self._suspend(key, "sleep", None, 1, wake)


def step_timeout(value: float | str | None, what: str) -> float | None:
    """A step's timeout in seconds (a number, or text like "10m"); ValueError otherwise."""
    if value is None:
        return None
    if isinstance(value, str):
        from ys.durations import parse_duration

        try:
            value = parse_duration(value, what)
        except YsError as exc:
            raise ValueError(exc.message) from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"{what} must be a number of seconds or text like '10m', not {type(value).__name__}"
        )
    if not 0 < value < 1e9:
        raise ValueError(f"{what} must be a number of seconds above 0, not {value!r}")
    return float(value)


def _savable(value: Any, what: str) -> str:
    """The canonical text of a result to save: TypeError if it is not a durable value,
    ValueTooLarge if it is over the limit the store enforces (it would be refused)."""
    enc = codec.encode(value, path=what)
    if enc.status != "encoded" or enc.canonical is None:
        raise TypeError(enc.message)
    return codec.check_size(enc.canonical, what)


def find_workflow(namespace: dict[str, Any]) -> Callable[..., Any] | None:
    """The function marked @ys.workflow, or failing that, one named `main`."""
    for value in namespace.values():
        if callable(value) and hasattr(value, "__ys_workflow__"):
            return cast("Callable[..., Any]", value)
    main = namespace.get("main")
    return cast("Callable[..., Any]", main) if callable(main) else None


def run_workflow(fn: Callable[..., Any], step: Step, params: Any) -> OutcomeJson:
    """Call the workflow and turn how it ended into a WorkflowRunOutcome.

    InfrastructureFailure propagates: it is not an outcome; but a Refused request fails the
    execution. A step that suspended ends the delivery suspended even if the workflow caught
    the suspension (a bare `except:`) and went on: its wake is recorded, and every later step
    raised the suspension again."""
    outcome = _outcome(fn, step, params)
    if step._suspended is not None and outcome["status"] != "suspended":
        sys.stderr.write(
            f"ys: step {step._suspended!r} suspended this delivery, but the workflow caught "
            "the suspension (a bare `except:` or `except BaseException`) and went on; the "
            "delivery ends suspended all the same\n"
        )
        outcome = {"status": "suspended"}
    if step.warnings:
        outcome["warnings"] = list(step.warnings)
    return outcome


def _outcome(fn: Callable[..., Any], step: Step, params: Any) -> OutcomeJson:
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
    except Refused as exc:
        sys.stderr.write(
            f"ys: {exc.code}: {exc.cause}; the execution fails (a retry would be refused again)\n"
        )
        return exc.outcome()
    except InfrastructureFailure:
        raise
    except Exception as exc:
        import traceback

        traceback.print_exception(exc)  # into the delivery's log; the outcome keeps name+message
        return {"status": "failed", "error": error_json(exc)}
    except (SystemExit, KeyboardInterrupt) as exc:
        # sys.exit() in the workflow's own code (a step body included) ends it on purpose:
        # that is its outcome, not a delivery to retry.
        return exit_outcome(exc)
    try:
        canonical = _savable(result, "result")
    except (TypeError, ValueTooLarge) as exc:
        return {"status": "failed", "error": error_json(exc)}
    return {"status": "completed", "result": codec.decode(canonical)}


def exit_outcome(exc: SystemExit | KeyboardInterrupt) -> OutcomeJson:
    """What a workflow that exits with a status ends with, as a shell workflow's exit does:
    completed for status 0, else failed with the status (code EXIT_STATUS)."""
    if isinstance(exc, KeyboardInterrupt):
        status, said = 130, "interrupted"
    else:
        code = exc.code
        status = 0 if code is None else code if isinstance(code, int) else 1
        said = "" if code is None or isinstance(code, int) else str(code)
    message = codec.clip(f"exit status {status}" + (f": {said}" if said else ""))
    sys.stderr.write(f"ys: the workflow raised {type(exc).__name__}: {message}\n")
    if status == 0:
        return {"status": "completed", "result": None}
    return {
        "status": "failed",
        "error": {"name": type(exc).__name__, "message": message, "code": "EXIT_STATUS"},
    }


def error_json(exc: BaseException) -> OutcomeErrorJson:
    """A failed outcome's error: name, message (cut so that it can always be saved), code."""
    message = codec.clip(exc.message if isinstance(exc, YsError) else str(exc))
    out: OutcomeErrorJson = {"name": type(exc).__name__, "message": message}
    if isinstance(exc, MemoryError) and runenv.memory_limited():
        # past the workflow's memory_max: a deterministic failure, as systemd's oom-kill
        # result (docs/workflows.md "Run environment")
        out["name"] = runenv.MEMORY_LIMIT_ERROR
        out["message"] = codec.clip(f"past its memory_max ({message or 'MemoryError'})")
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        out["code"] = code
    return out
