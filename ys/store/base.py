"""What every store adapter offers, and the values it returns.

The contract tests in tests/store/ run against every adapter; SQLite is the only one today.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from ys import codec
from ys.durations import MAX_TIME, MIN_TIME
from ys.errors import InvalidArgument, WorkflowEffectError, WorkflowStartError
from ys.store.records import Event, Record

MAX_PARAMS_BYTES = 2 * 1024 * 1024
MAX_ID_BYTES = 256
DEFAULT_PAGE = 100
MAX_PAGE = 1000
_WORKFLOW_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


@dataclass(frozen=True)
class Admission:
    execution_id: str
    started: bool


@dataclass(frozen=True)
class Delivery:
    execution_id: str
    token: str
    attempt: int
    lease_expires_at: float
    workflow: str
    cancel_requested: bool = False  # the workflow sees it at its first step that is not history
    # A delivery since the request ended without an outcome (killed, crashed, its daemon
    # died): it had its chance, so this one runs no workflow code and ends it cancelled.
    cancel_seen: bool = False
    script_sha256: str | None = None  # the script version this delivery runs (pin: admission's)


@dataclass(frozen=True)
class StepRecord:
    key: str
    kind: str
    status: str  # completed | failed | waiting
    value: str | None  # canonical encoding of the result or the tagged error
    attempts: int
    wake_at: float | None
    updated_at: float


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_page_token: str | None


@dataclass
class Description:
    record: Record
    history_bytes: int
    steps: list[StepRecord] = field(default_factory=list)
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    children: list[Record] = field(default_factory=list)
    lease_expires_at: float | None = None
    failed_attempts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by key


def check_execution_id(execution_id: str, what: str = "execution ID") -> str:
    """Any printable text up to 256 bytes without control characters."""
    if not isinstance(execution_id, str) or not execution_id:
        raise InvalidArgument("INVALID_ARGUMENT", f"the {what} must be non-empty text")
    if len(execution_id.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"the {what} is longer than {MAX_ID_BYTES} bytes"
        )
    if not execution_id.isprintable():
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"the {what} {execution_id!r} contains control characters"
        )
    try:
        execution_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument("INVALID_ARGUMENT", f"the {what} is not valid UTF-8") from None
    return execution_id


def check_workflow_name(name: str) -> str:
    """Workflow names are file names: letters, digits, '.', '_', '-', at most 128."""
    if not isinstance(name, str) or not _WORKFLOW_NAME.match(name) or name in (".", ".."):
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"workflow name {name!r} is not valid: use letters, digits, '.', '_' or '-' "
            "(at most 128)",
        )
    return name


def check_time(value: Any, what: str) -> float:
    """The one check of a time that enters the store (a wake, a timeout, a clock reading):
    a finite number of epoch seconds within the years 1970..9999 (a later year makes every
    read of the record fail; ys.durations.MAX_TIME says why). A NaN due time would erase
    the pending wake it merges with (min() with NaN is NaN, which SQLite stores as NULL); an
    infinite or far one could never be rendered. Raises INVALID_ARGUMENT naming `what`."""
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not MIN_TIME <= value <= MAX_TIME):  # False for NaN as well
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"{what} must be a time in epoch seconds between 1970 and 9999 "
            f"(0..{MAX_TIME:.3f}), not {value!r}",
        )
    return float(value)


def check_seconds(value: Any, what: str) -> float:
    """A duration: a finite number of seconds >= 0 (a bool is not a number)."""
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not 0 <= value <= MAX_TIME):  # False for NaN as well
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"{what} must be a number of seconds from 0 to {int(MAX_TIME)}, not {value!r}",
        )
    return float(value)


def json_kind(value: Any) -> str:
    """What a JSON value is, for messages: `an array`, `text`, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list | tuple):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


def check_object(value: Any, what: str) -> dict[str, Any] | None:
    """An object (a dict) or None (absent): params and context are objects (DESIGN.md §3)."""
    if value is not None and not isinstance(value, dict):
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"{what} must be an object (a dict), not {json_kind(value)}"
        )
    return value


def request_params(params: Any) -> str:
    """The canonical request params: `null` when missing (which never matches `{}`)."""
    if params is None:
        return "null"
    if not isinstance(params, dict):
        raise WorkflowStartError(
            "INVALID_START_PARAMETERS", "start params must be an object (a dict) or omitted"
        )
    enc = codec.encode(params, path="params")
    if enc.status != "encoded" or enc.canonical is None:
        raise WorkflowStartError("INVALID_START_PARAMETERS", enc.message or "invalid params")
    if len(enc.canonical.encode()) > MAX_PARAMS_BYTES:
        raise WorkflowStartError("INVALID_START_PARAMETERS", "params are over 2 MiB encoded")
    return enc.canonical


def validate_start(step_key: str, workflow: str) -> None:
    from ys.errors import YsError

    try:
        check_workflow_name(workflow)
    except YsError as exc:
        raise WorkflowStartError("INVALID_ARGUMENT", exc.message) from None
    if not isinstance(step_key, str) or not step_key:
        raise WorkflowStartError("INVALID_START_PARAMETERS", "a step key must be non-empty text")


def check_request(effect_id: Any, operation: Any, input: Any, retry_in: Any = 0.0,
                  now: float | None = None) -> str:
    """Validate an effect request before begin; returns the canonical input. With `now`, the
    wait `retry_in` seconds from then must be a time the store takes (check_time).
    Raises WorkflowEffectError(INVALID_EFFECT_REQUEST)."""

    def bad(msg: str) -> WorkflowEffectError:
        return WorkflowEffectError("INVALID_EFFECT_REQUEST", msg)

    if not isinstance(effect_id, str) or not effect_id or not effect_id.isprintable():
        raise bad("effect_id must be non-empty printable text")
    if len(effect_id.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        raise bad(f"effect_id is longer than {MAX_ID_BYTES} bytes")
    if not isinstance(operation, str) or not operation or not operation.isprintable():
        raise bad("operation must be non-empty printable text")
    if not isinstance(input, dict):
        raise bad("input must be an object (a dict of durable values)")
    enc = codec.encode(input, path="input")
    if enc.status != "encoded" or enc.canonical is None:
        raise bad(enc.message or "input is not a durable value")
    if (isinstance(retry_in, bool) or not isinstance(retry_in, int | float)
            or not 0 <= retry_in <= MAX_TIME):  # False for NaN and infinity as well
        raise bad(f"retry_in must be a finite number of seconds >= 0, not {retry_in!r}")
    if now is not None and not now + retry_in <= MAX_TIME:
        raise bad(f"retry_in must end before the year 10000, not {retry_in!r} s from now")
    return enc.canonical


class Store(Protocol):
    """The runtime adapter: execution client (RFC 001), steps, and reads. The `_async` writes
    are the same writes for the daemon's event loop (awaited, not run in a thread)."""

    def admit(
        self,
        workflow: str,
        params: Any = None,
        *,
        context: dict[str, Any] | None = None,
        execution_id: str | None = None,
        if_exists: str = "fail",
        parent: dict[str, Any] | None = None,
        now: float | None = None,
    ) -> Admission: ...

    async def admit_async(
        self,
        workflow: str,
        params: Any = None,
        *,
        context: dict[str, Any] | None = None,
        execution_id: str | None = None,
        if_exists: str = "fail",
        parent: dict[str, Any] | None = None,
        now: float | None = None,
    ) -> Admission: ...

    def get(self, execution_id: str) -> Record | None: ...

    def request_wake(self, execution_id: str, at: float | None = None, *, now: float | None = None) -> str: ...

    def claim_due(
        self, now: float | None = None, limit: int = 10, lease_seconds: float | None = None
    ) -> builtins.list[Delivery]: ...

    def renew(self, execution_id: str, token: str, *, now: float | None = None,
              lease_seconds: float | None = None) -> float: ...

    async def renew_async(self, execution_id: str, token: str, *, now: float | None = None,
                          lease_seconds: float | None = None) -> float: ...

    def release(self, execution_id: str, token: str, *, retry_at: float | None = None,
                reason: str = "retry", now: float | None = None) -> None: ...

    def acknowledge(self, execution_id: str, token: str, outcome: dict[str, Any], *,
                    now: float | None = None, on_failure: str | None = None) -> dict[str, Any]:
        """A failed outcome admits `on_failure` (`<ID>.on-failure`) in the same transaction."""

    async def acknowledge_async(self, execution_id: str, token: str, outcome: dict[str, Any],
                                *, now: float | None = None,
                                on_failure: str | None = None) -> dict[str, Any]: ...

    def save_step(self, execution_id: str, token: str, key: str, *, kind: str, status: str,
                  value: str | None, attempts: int = 1, wake_at: float | None = None,
                  now: float | None = None) -> bool: ...

    async def save_step_async(self, execution_id: str, token: str, key: str, *, kind: str,
                              status: str, value: str | None, attempts: int = 1,
                              wake_at: float | None = None, now: float | None = None) -> bool: ...

    def steps(self, execution_id: str) -> builtins.list[StepRecord]: ...

    def history(self, execution_id: str, limit: int = DEFAULT_PAGE,
                page_token: str | None = None) -> Page: ...

    def list(self, *, statuses: builtins.list[str] | None = None, workflow: str | None = None,
             parent: str | None = None, limit: int = DEFAULT_PAGE,
             page_token: str | None = None) -> Page: ...

    def describe(self, execution_id: str) -> Description: ...

    def verify(self) -> builtins.list[str]: ...

    def events(self, execution_id: str) -> builtins.list[Event]: ...

    def close(self) -> None: ...
