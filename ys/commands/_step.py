"""What `ys step ...` does, without typer: steps for shell workflows.

A shell workflow is any executable in the workflows folder that is not Python. The daemon runs
it in its own session with YS_EXECUTION_ID, YS_DELIVERY_TOKEN and YS_SOCKET set; each
`ys step` reads the delivery's state over the API and runs one `ys.sdk.Step` method on it, so
shell steps replay exactly as Python steps do (the same records, the same keys).

A step that must wait (`sleep`, `wait`) records itself and its wake, then ends the script by
sending SIGTERM to its process group: the daemon sees the suspension it recorded and delivers
the script again when due, from the top. A step that cannot be recorded (the daemon went away,
the lease was lost) ends the script the same way, so no script runs past a step that is not
saved. Each `ys step` names its key when it reads the delivery's state, and the daemon refuses
a key the delivery already took: the script then fails DUPLICATE_STEP_KEY, as a Python
workflow does. Standard library plus ys.sdk only: `ys.cli` sends `ys step` here before typer loads.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote

from ys.commands._output import emit_json, error, fail, report
from ys.errors import YsError

if TYPE_CHECKING:
    from ys.sdk import Step
    from ys.values import OutcomeJson

ENV = ("YS_EXECUTION_ID", "YS_DELIVERY_TOKEN", "YS_SOCKET")
EXIT_TIMEOUT = 6  # `ys step wait --timeout`: the exit code of every timed-out command


def _env() -> tuple[str, str, str]:
    values = [os.environ.get(k, "") for k in ENV]
    if not all(values):
        missing = ", ".join(k for k, v in zip(ENV, values, strict=True) if not v)
        fail(
            "INVALID_ARGUMENT",
            f"ys step runs only inside a shell workflow ({missing} not set)",
            hint="put the script in the workflows folder and run it with `ys trigger NAME`",
        )
    return values[0], values[1], values[2]


def _end_script(code: int) -> NoReturn:
    """End the whole script (this process's group: the daemon started the script in a session
    of its own); exit `code` if a trap keeps the script alive."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.killpg(os.getpgrp(), signal.SIGTERM)
    sys.exit(code)


def _infra(exc: BaseException) -> NoReturn:
    """The step could not be recorded: say why and end the script (no outcome is reported;
    the daemon delivers it again, or a newer delivery already owns it)."""
    cause = getattr(exc, "cause", exc)
    if isinstance(cause, YsError):
        line = f"{cause.code}: {cause.message}"
    else:
        line = f"{type(cause).__name__}: {cause}"
    sys.stderr.write(f"ys step: the step was not recorded ({line}); ending the script\n")
    _end_script(75)


def _cancelled(transport: Any, base: str) -> NoReturn:
    """`ys cancel` reached this script: report it cancelled and end it."""
    try:
        transport.request("POST", f"{base}/outcome", {"outcome": {"status": "cancelled"}})
    except YsError as exc:
        _infra(exc)
    sys.stderr.write("ys step: the execution was cancelled; ending the script\n")
    _end_script(130)


def _fail_execution(
    transport: Any, base: str, exc: YsError, outcome: OutcomeJson | None = None
) -> NoReturn:
    """A request refused for good: the script took one key twice in one run (it fails as a
    Python workflow does when step.run raises DUPLICATE_STEP_KEY, not replaying the first
    step's record as this one), or the daemon refused the step's request in a way no later
    delivery could change (ys.sdk.Refused): the execution fails with that error."""
    if outcome is None:
        outcome = {
            "status": "failed",
            "error": {"name": "YsError", "message": exc.message, "code": exc.code},
        }
    try:
        transport.request("POST", f"{base}/outcome", {"outcome": outcome})
    except YsError as lost:
        _infra(lost)
    report(exc)
    _end_script(exc.exit_code)


def _with_step(key: str, action: Callable[[Step], Any]) -> Any:
    """Run `action(step)` on a Step made from the delivery's state; a suspension, cancellation
    or infrastructure failure ends the script, so this returns only when the script goes on."""
    if not key or not key.isprintable():
        fail(
            "INVALID_ARGUMENT",
            f"step key {key!r} must be printable text",
            hint="name each step, for example ys step run fetch -- curl ...",
        )
    from ys.client import Transport
    from ys.sdk import InfrastructureFailure, Refused, Suspend
    from ys.worker.delivery import ApiBackend, make_step

    execution_id, token, socket_path = _env()
    transport = Transport(socket_path, timeout=120.0, token=token)
    backend = ApiBackend(transport, execution_id)
    try:
        state = transport.request("GET", f"{backend.base}/run?step={quote(key, safe='')}")
    except YsError as exc:
        if exc.code == "DUPLICATE_STEP_KEY":
            _fail_execution(transport, backend.base, exc)
        _infra(exc)
    record = state["record"]
    if record["status"] in ("completed", "failed", "cancelled"):
        sys.stderr.write(f"ys step: {execution_id} is already {record['status']}\n")
        _end_script(1)
    step = make_step(backend, state)
    from ys.errors import WorkflowCancelledError

    try:
        return action(step)
    except Suspend:
        _end_script(0)
    except WorkflowCancelledError:
        _cancelled(transport, backend.base)
    except Refused as exc:
        cause = exc.cause if isinstance(exc.cause, YsError) else YsError(exc.code, str(exc.cause))
        _fail_execution(transport, backend.base, cause, exc.outcome())
    except InfrastructureFailure as exc:
        _infra(exc)
    except ValueError as exc:  # the SDK refused an argument (a wake past 9999, say)
        fail("INVALID_ARGUMENT", str(exc), hint="see ys step --help")


def _state() -> dict[str, Any]:
    from ys.client import Transport
    from ys.worker.delivery import ApiBackend

    execution_id, token, socket_path = _env()
    transport = Transport(socket_path, timeout=60.0, token=token)
    try:
        out: dict[str, Any] = transport.request(
            "GET", f"{ApiBackend(transport, execution_id).base}/run"
        )
    except YsError as exc:
        _infra(exc)  # no script goes on with params it could not read
    return out


def _print_value(value: Any, json_: bool) -> None:
    """A value for a shell: text as it is (`x=$(ys step ...)`), anything else as JSON."""
    if isinstance(value, str) and not json_:
        sys.stdout.write(value + "\n")
    else:
        emit_json(value)


# -- the commands ----------------------------------------------------------------------------


def run(
    key: str,
    rest: list[str],
    json_: bool = False,
    timeout: str | None = None,
    retry: str | None = None,
    retry_interval: str | None = None,
) -> int:
    """`ys step run KEY REST...` (REST: the options allowed after KEY, `--`, the command):
    run the command once and record its exit status and stdout, or replay them
    (ys/commands/_step_run.py)."""
    from ys.commands import _step_run as sr

    opts = sr.split_options(rest, sr.RunOptions(timeout, retry, retry_interval))
    limit, policy = sr.policy(opts)  # a usage error ends here: nothing runs, nothing recorded
    ran = _with_step(key, lambda step: sr.take(step, key, opts.command, limit, policy, not json_))
    return sr.show(key, ran, json_)


def sleep(key: str, duration: str, json_: bool = False) -> int:
    """Record the step and its wake and end the script; once due, record it done and go on."""
    from ys.durations import parse_duration

    seconds = parse_duration(duration, "DURATION")
    _with_step(key, lambda step: step.sleep(key, seconds))
    if json_:
        emit_json({"key": key, "slept": True})
    return 0


def start(
    key: str,
    workflow: str,
    pairs: list[str] | None,
    spec: str | None,
    detached: bool = False,
    json_: bool = False,
) -> int:
    """Start a child workflow once, however often the script runs; print its ID."""
    from ys.commands._params import build_params

    params = build_params(pairs, spec)
    child = _with_step(key, lambda step: step.start(key, workflow, params, detached=detached))
    if json_:
        emit_json({"execution_id": child})
    else:
        sys.stdout.write(f"{child}\n")
    return 0


def wait(key: str, store_key: str, timeout: str | None = None, json_: bool = False) -> int:
    """Wait (durably, the script ends meanwhile) until the store key has a value; print it."""
    from ys.durations import parse_duration
    from ys.errors import WaitTimeout

    seconds = None if timeout is None else parse_duration(timeout, "--timeout")

    def action(step: Step) -> Any:
        try:
            return step.wait_for(key, store_key, timeout=seconds)
        except WaitTimeout as exc:
            return exc

    value = _with_step(key, action)
    if isinstance(value, WaitTimeout):
        report(
            error(
                "WAIT_TIMEOUT",
                value.message,
                hint=f"`ys store put {store_key} VALUE` gives it a value",
            )
        )
        return EXIT_TIMEOUT
    _print_value(value, json_)
    return 0


def params(key: str | None = None, json_: bool = False, default: str | None = None) -> int:
    """Print the execution's params as JSON, or one param (text as it is, else JSON); a
    missing param prints `default` (read as a `-p` value) when one is given."""
    state = _state()
    values = json.loads(state["params"]) if state.get("params") else {}
    if key is None:
        emit_json(values)
        return 0
    if (not isinstance(values, dict) or key not in values) and default is not None:
        from ys.commands._params import param_value

        _print_value(param_value(default), json_)
        return 0
    if not isinstance(values, dict) or key not in values:
        fail(
            "NOT_FOUND",
            f"the execution has no param named {key!r}",
            hint="`ys step params` prints them all",
        )
    _print_value(values[key], json_)
    return 0


# -- the fast path: `ys step ...` without typer ----------------------------------------------

# command -> (positional names, optional positionals, valued options, flag options)
_SHAPES: dict[str, tuple[tuple[str, ...], int, tuple[str, ...], tuple[str, ...]]] = {
    "sleep": (("key", "duration"), 0, (), ("--json",)),
    "start": (("key", "workflow"), 0, ("-p", "--param", "--params"), ("--detached", "--json")),
    "wait": (("key", "store_key"), 0, ("--timeout",), ("--json",)),
    "params": (("key",), 1, ("--default",), ("--json",)),
}


def _parse(
    shape: tuple[tuple[str, ...], int, tuple[str, ...], tuple[str, ...]], args: list[str]
) -> dict[str, Any] | None:
    names, optional, valued, flags = shape
    pos: list[str] = []
    opts: dict[str, Any] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a in flags and a not in opts:
            opts[a] = True
            i += 1
        elif a in valued and i + 1 < len(args):
            opts.setdefault(a, []).append(args[i + 1])
            i += 2
        elif a.startswith("-") and a != "-":
            return None  # help, `--`, an unknown or incomplete option: typer says what it is
        else:
            pos.append(a)
            i += 1
    if not len(names) - optional <= len(pos) <= len(names):
        return None
    out: dict[str, Any] = dict(zip(names, pos, strict=False))
    out["opts"] = opts
    return out


def fast(argv: list[str]) -> Callable[[], int] | None:
    """`step ...` as a call of the function above, or None for anything typer should parse."""
    if len(argv) < 2 or argv[0] != "step":
        return None
    cmd, args = argv[1], argv[2:]
    if cmd == "run":
        from ys.commands._step_run import OPTIONS

        before: dict[str, str] = {}
        json_ = False
        while args and args[0].startswith("-"):
            if args[0] == "--json" and not json_:
                json_, args = True, args[1:]
            elif args[0] in OPTIONS and len(args) > 1 and args[0] not in before:
                before[args[0]], args = args[1], args[2:]
            else:
                return None  # help, `--`, anything else: typer says what it is
        if not args:
            return None
        return lambda: run(
            args[0],
            args[1:],
            json_,
            before.get("--timeout"),
            before.get("--retry"),
            before.get("--retry-interval"),
        )
    shape = _SHAPES.get(cmd)
    parsed = None if shape is None else _parse(shape, args)
    if parsed is None:
        return None
    o = parsed.pop("opts")
    j = bool(o.get("--json"))
    if cmd == "sleep":
        return lambda: sleep(parsed["key"], parsed["duration"], j)
    if cmd == "start":
        if len(o.get("--params", [])) > 1:
            return None
        pairs = o.get("-p", []) + o.get("--param", [])
        spec = (o.get("--params") or [None])[0]
        return lambda: start(
            parsed["key"], parsed["workflow"], pairs or None, spec, bool(o.get("--detached")), j
        )
    if cmd == "wait":
        if len(o.get("--timeout", [])) > 1:
            return None
        return lambda: wait(
            parsed["key"], parsed["store_key"], (o.get("--timeout") or [None])[0], j
        )
    if len(o.get("--default", [])) > 1:
        return None
    return lambda: params(parsed.get("key"), j, (o.get("--default") or [None])[0])
