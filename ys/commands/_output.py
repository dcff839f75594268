"""The edge between a command and the terminal: the client in, JSON and errors out.

`report` is the one place an error becomes its stderr line (`CODE: what happened; what to do`)
and its exit code (`ys.errors.exit_code`); `guarded` wraps a whole command run with it.
Standard library only: the fast paths in `ys.cli` use this module without typer or rich.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from ys.errors import YsError, from_code

if TYPE_CHECKING:
    from ys.client import Client

# What to do, per code, when the message does not already say it (a message that carries its
# own advice has a "; " in it, as the daemon's WORKFLOW_NOT_FOUND "...; did you mean x?" does).
HINTS: dict[str, str] = {
    "DAEMON_UNAVAILABLE": "start it with `ys daemon start`",
    "DATABASE_UNAVAILABLE": "retry once the database answers (`ys daemon status` says when)",
    "EXECUTION_NOT_FOUND": "`ys list` shows the executions there are",
    "WORKFLOW_NOT_FOUND": "`ys workflows` shows the scripts the daemon knows",
    "NOT_FOUND": "check the name and try again",
    "EXECUTION_ID_CONFLICT": "use another --id, or --if-exists use-existing",
    "START_REQUEST_MISMATCH": "use another step key, or start the same workflow and params",
    "EFFECT_REQUEST_MISMATCH": "use another effect ID, or the same operation and input",
    "VERSION_CONFLICT": "read it again with `ys store get` and retry",
    "INVALID_ARGUMENT": "fix it and try again (`ys --help` lists the commands)",
    "INVALID_EXECUTION_EVENT": "fix it and try again",
    "INVALID_START_PARAMETERS": "params must be JSON values of at most 2 MiB",
    "TIMEOUT": "wait longer with --timeout, or see where it is with `ys describe`",
    "RESOURCE_EXHAUSTED": "free disk space, or prune old executions with `ys gc`",
    "LEASE_LOST": "another delivery owns this execution now",
    "DUPLICATE_STEP_KEY": "give each step its own key",
    "INTERNAL": "this is a bug in ys; the daemon's log (`ys daemon status`) may say more",
}


def error(code: str, message: str, **context: Any) -> YsError:
    """An error of the class its code belongs to; `hint=` overrides the code's hint."""
    return from_code(code, message, **context)


def fail(code: str, message: str, **context: Any) -> NoReturn:
    raise error(code, message, **context)


def error_line(exc: YsError) -> str:
    message = (exc.message or exc.code).replace("\r", " ").replace("\n", " ").strip()
    hint = exc.context.get("hint") or HINTS.get(exc.code)
    if hint and "; " not in message:
        message = f"{message}; {hint}"
    return f"{exc.code}: {message}"


def report(exc: YsError) -> int:
    """Print the error's one line on stderr; returns its exit code."""
    try:
        sys.stdout.flush()
    except OSError:
        pass
    sys.stderr.write(error_line(exc) + "\n")
    sys.stderr.flush()
    return exc.exit_code


def guarded(run: Callable[[], int]) -> int:
    """Run a command; every way it can end becomes an exit code, printed at most once."""
    try:
        code = run()
        sys.stdout.flush()
        return code
    except YsError as exc:
        return report(exc)
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        return 130
    except BrokenPipeError:
        # The reader went away (`ys list | head`): stop quietly, as cat does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except Exception as exc:  # the last line of defence: one line, not a traceback
        if os.environ.get("YS_DEBUG"):
            raise
        return report(YsError("INTERNAL", f"{type(exc).__name__}: {exc}"))


def emit_json(obj: Any) -> None:
    """One JSON document on stdout, as the daemon gave it."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def emit_json_line(obj: Any) -> None:
    """One JSON object per line (the --follow streams), flushed so a reader sees it now."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def client(*, autostart: bool = True, timeout: float | None = 60.0) -> Client:
    """The client a command uses; it starts the daemon when none answers unless YS_AUTOSTART=0
    (ys.autostart.ensure_daemon reads that), or when `autostart` is False."""
    from ys.client import Client

    return Client(autostart=autostart, timeout=timeout)


TERMINAL = ("completed", "failed", "cancelled")


def outcome_exit_code(record: dict[str, Any]) -> int:
    """`wait` and `trigger --wait`: 0 completed, 1 failed or cancelled."""
    return 0 if record.get("status") == "completed" else 1
