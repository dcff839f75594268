"""Errors of ys: one small tree, stable codes from the spec.

    YsError(code, message)                 root; .code is the spec's string, .exit_code the CLI's
    ├── ExecutionAdmissionError            EXECUTION_ID_CONFLICT, INVALID_EXECUTION_EVENT
    ├── ExecutionNotTerminal               EXECUTION_NOT_TERMINAL (a retry of a live execution)
    ├── WorkflowStartError                 INVALID_START_PARAMETERS, START_REQUEST_MISMATCH
    ├── WorkflowEffectError                INVALID_EFFECT_REQUEST, EFFECT_REQUEST_MISMATCH
    ├── ChildWorkflowFailed                a child's failed outcome, raised in its caller
    ├── WorkflowCancelledError             raised at the next step after `ys cancel`
    ├── WaitTimeout                        step.wait_for timed out
    ├── StepTimeout                        an attempt of step.run(timeout=) ran too long
    ├── ExecutionTimeout                   TIMEOUT: Client.wait's timeout passed first
    ├── InvalidArgument                    INVALID_ARGUMENT
    │   └── ValueTooLarge                  a value over the 2 MiB a saved value may take
    ├── NotFoundError                      EXECUTION_NOT_FOUND, WORKFLOW_NOT_FOUND, NOT_FOUND
    ├── LeaseLost                          a stale delivery token tried to write
    ├── DatabaseMoved                      FAILED_PRECONDITION: `ys migrate` moved the data away
    └── DaemonUnavailable                  nothing answers on the socket
        └── DatabaseUnavailable            the daemon answers, its database does not

Every code maps to one HTTP status (the daemon's API) and one exit code (the CLI) here, and
nowhere else.
"""

from __future__ import annotations

from typing import Any, TypedDict

# code -> (HTTP status, CLI exit code)
_CODES: dict[str, tuple[int, int]] = {
    "INVALID_ARGUMENT": (400, 2),
    "INVALID_EXECUTION_EVENT": (400, 2),
    "INVALID_START_PARAMETERS": (400, 2),
    "INVALID_EFFECT_REQUEST": (400, 2),
    "EXECUTION_ID_CONFLICT": (409, 3),
    "START_REQUEST_MISMATCH": (409, 3),
    "EFFECT_REQUEST_MISMATCH": (409, 3),
    "VERSION_CONFLICT": (409, 3),
    "LEASE_LOST": (409, 3),
    "FAILED_PRECONDITION": (409, 3),
    "EXECUTION_NOT_TERMINAL": (409, 3),
    "DUPLICATE_STEP_KEY": (409, 3),  # one key for two steps in one run of a workflow
    "EXECUTION_NOT_FOUND": (404, 4),
    "WORKFLOW_NOT_FOUND": (404, 4),
    "NOT_FOUND": (404, 4),
    "DAEMON_UNAVAILABLE": (503, 5),
    "DATABASE_UNAVAILABLE": (503, 5),
    "TIMEOUT": (504, 6),
    "RESOURCE_EXHAUSTED": (507, 7),
    # Asked of an effect in no state to answer it (settled before begun): the caller's
    # request is wrong for the state, a conflict like FAILED_PRECONDITION, never a 5xx.
    "EFFECT_RUNTIME_INVARIANT": (409, 3),
    "INTERNAL": (500, 1),
}


def http_status(code: str) -> int:
    return _CODES.get(code, (500, 1))[0]


def exit_code(code: str) -> int:
    return _CODES.get(code, (500, 1))[1]


class ErrorJson(TypedDict):
    """An error on the wire: an HTTP reply's body and the worker channel's `error`."""

    code: str
    message: str


class YsError(Exception):
    """An error with a stable code. `context` carries structured fields for renderers."""

    default_code = "INTERNAL"

    def __init__(self, code: str | None = None, message: str = "", **context: Any) -> None:
        self.code = code or self.default_code
        self.message = message
        self.context = context
        super().__init__(message or self.code)

    @property
    def exit_code(self) -> int:
        return exit_code(self.code)

    @property
    def http_status(self) -> int:
        return http_status(self.code)

    def to_json(self) -> ErrorJson:
        return {"code": self.code, "message": self.message}


class ExecutionAdmissionError(YsError):
    default_code = "EXECUTION_ID_CONFLICT"


class ExecutionNotTerminal(YsError):
    """Only a terminal execution can be retried (exit 3)."""

    default_code = "EXECUTION_NOT_TERMINAL"


class WorkflowStartError(YsError):
    default_code = "START_REQUEST_MISMATCH"


class WorkflowEffectError(YsError):
    default_code = "EFFECT_REQUEST_MISMATCH"


class ChildWorkflowFailed(YsError):
    default_code = "CHILD_WORKFLOW_FAILED"

    def __init__(self, message: str = "", *, child_id: str = "", name: str = "", **kw: Any):
        super().__init__("CHILD_WORKFLOW_FAILED", message, child_id=child_id, name=name, **kw)
        self.child_id = child_id
        self.name = name


class WorkflowCancelledError(YsError):
    default_code = "CANCELLED"


class WaitTimeout(YsError):
    default_code = "WAIT_TIMEOUT"


class StepTimeout(YsError):
    """An attempt of `step.run(..., timeout=)` ran past its limit: the daemon killed its
    worker and recorded the attempt failed with this error (a `retry=` policy retries it)."""

    default_code = "STEP_TIMEOUT"


class ExecutionTimeout(YsError):
    """`Client.wait`'s timeout passed before the execution finished (the CLI's exit 6);
    `.record` is the execution's record then."""

    default_code = "TIMEOUT"

    def __init__(self, message: str = "", *, record: dict[str, Any] | None = None) -> None:
        super().__init__("TIMEOUT", message, record=record)
        self.record: dict[str, Any] = record or {}


class EffectInvariantError(YsError):
    """The runtime's own effect data or behaviour is wrong: the delivery is retried."""

    default_code = "EFFECT_RUNTIME_INVARIANT"


class VersionConflict(YsError):
    default_code = "VERSION_CONFLICT"


class LeaseLost(YsError):
    default_code = "LEASE_LOST"


class DatabaseMoved(YsError):
    """A database whose data `ys migrate` moved to another: no daemon starts on it, which would
    run the moved executions a second time (docs/design.md, "Keeping and moving the data")."""

    default_code = "FAILED_PRECONDITION"

    def __init__(self, database: str, moved_to: str) -> None:
        super().__init__(
            None,
            f"the data of {database} was moved to {moved_to} by `ys migrate`; set `database` "
            "in config.toml (or YS_DATABASE) to that database and start the daemon there",
            moved_to=moved_to,
        )


class DaemonUnavailable(YsError):
    default_code = "DAEMON_UNAVAILABLE"


class DatabaseUnavailable(DaemonUnavailable):
    """The daemon answers but its database does not (a PostgreSQL server restarting, down,
    or cut off): retry once it is back. A DaemonUnavailable, so whatever retries a daemon
    that cannot be reached retries this too."""

    default_code = "DATABASE_UNAVAILABLE"


class NotFoundError(YsError):
    """EXECUTION_NOT_FOUND, WORKFLOW_NOT_FOUND, NOT_FOUND: what was asked for does not exist (a
    404). Not `ys.NotFound`, the effect lookup's answer that nothing happened (ys.sdk)."""

    default_code = "EXECUTION_NOT_FOUND"


NotFound = NotFoundError  # its name before the rename, for applications that catch it


class InvalidArgument(YsError):
    default_code = "INVALID_ARGUMENT"


class ValueTooLarge(InvalidArgument):
    """A step's result or a workflow's result is too big to save: the step's (or the
    execution's) failure, recorded once, never a delivery to retry."""


class ResourceExhausted(YsError):
    default_code = "RESOURCE_EXHAUSTED"


_BY_CODE: dict[str, type[YsError]] = {
    "EXECUTION_ID_CONFLICT": ExecutionAdmissionError,
    "INVALID_EXECUTION_EVENT": ExecutionAdmissionError,
    "EXECUTION_NOT_TERMINAL": ExecutionNotTerminal,
    "INVALID_START_PARAMETERS": WorkflowStartError,
    "START_REQUEST_MISMATCH": WorkflowStartError,
    "INVALID_EFFECT_REQUEST": WorkflowEffectError,
    "EFFECT_REQUEST_MISMATCH": WorkflowEffectError,
    "LEASE_LOST": LeaseLost,
    "VERSION_CONFLICT": VersionConflict,
    "EFFECT_RUNTIME_INVARIANT": EffectInvariantError,
    "EXECUTION_NOT_FOUND": NotFoundError,
    "WORKFLOW_NOT_FOUND": NotFoundError,
    "NOT_FOUND": NotFoundError,
    "INVALID_ARGUMENT": InvalidArgument,
    "RESOURCE_EXHAUSTED": ResourceExhausted,
    "DAEMON_UNAVAILABLE": DaemonUnavailable,
    "DATABASE_UNAVAILABLE": DatabaseUnavailable,
}


# What the runtime refuses for good: the same request is refused again however often a delivery
# is retried (a bad argument, a workflow that does not exist). A workflow that asks for one
# fails at once with it (ys.sdk.Refused), where any other runtime error is retried.
REFUSALS = frozenset({"INVALID_ARGUMENT", "WORKFLOW_NOT_FOUND"})


def from_code(code: str, message: str, **context: Any) -> YsError:
    """The error class that a code belongs to (used to revive errors sent over the API)."""
    cls = _BY_CODE.get(code, YsError)
    err = cls.__new__(cls)
    YsError.__init__(err, code, message, **context)
    return err
