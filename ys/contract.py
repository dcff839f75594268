"""The contract's checks, in one neutral module: IDs, workflow names, times and durations,
params, size limits, and the canonical forms that start and effect requests are compared in.

The SDK, the worker, the API and every store adapter import these, and this module imports
none of them (only the codec, the errors and the time bounds), so each side refuses the same
input with the same code and message.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from typing import Any

from ys import codec, cron
from ys.durations import MAX_TIME, MIN_TIME
from ys.errors import InvalidArgument, WorkflowEffectError, WorkflowStartError, YsError

MAX_PARAMS_BYTES = 2 * 1024 * 1024  # params, context and durable values, encoded
MAX_ID_BYTES = 256  # execution IDs, store keys, effect IDs
_WORKFLOW_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


def check_execution_id(execution_id: str, what: str = "execution ID") -> str:
    """Any printable text up to 256 bytes without control characters."""
    if not isinstance(execution_id, str) or not execution_id:
        raise InvalidArgument("INVALID_ARGUMENT", f"the {what} must be non-empty text")
    if len(execution_id.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        raise InvalidArgument("INVALID_ARGUMENT", f"the {what} is longer than {MAX_ID_BYTES} bytes")
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
    if not isinstance(name, str) or not _WORKFLOW_NAME.fullmatch(name) or name in (".", ".."):
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
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not MIN_TIME <= value <= MAX_TIME
    ):  # False for NaN as well
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"{what} must be a time in epoch seconds between 1970 and 9999 "
            f"(0..{MAX_TIME:.3f}), not {value!r}",
        )
    return float(value)


def check_seconds(value: Any, what: str) -> float:
    """A duration: a finite number of seconds >= 0 (a bool is not a number)."""
    if (
        isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_TIME
    ):  # False for NaN as well
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


def check_object(value: object, what: str) -> dict[str, object] | None:
    """An object (a dict) or None (absent): params and context are objects (docs/design.md, "Wire formats")."""
    if value is not None and not isinstance(value, dict):
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"{what} must be an object (a dict), not {json_kind(value)}"
        )
    return value


def request_params(params: Any) -> str:
    """A start request's params in the canonical form requests are compared in: `null` when
    missing (which never matches `{}`). The worker's side encodes them, once."""
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


def check_params_json(params_json: Any) -> str:
    """A start request's params as the worker encoded them: the canonical text of an object,
    or "null" (omitted). Checked once, by the store: it must decode to an object, within the
    limit, and be in canonical form (requests are compared as text)."""
    if params_json == "null":
        return "null"

    def bad(message: str) -> WorkflowStartError:
        return WorkflowStartError("INVALID_START_PARAMETERS", message)

    if not isinstance(params_json, str):
        raise bad("start params must be canonical JSON text (params_json)")
    if len(params_json.encode("utf-8", "surrogatepass")) > MAX_PARAMS_BYTES:
        raise bad("params are over 2 MiB encoded")
    try:
        value = codec.decode(params_json)
    except ValueError as exc:
        raise bad(f"start params are not durable JSON: {exc}") from None
    if not isinstance(value, dict):
        raise bad("start params must be an object (a dict) or omitted")
    if codec.dumps(value) != params_json:
        raise bad("start params are not in canonical form; encode them with ys.codec")
    return params_json


def check_start(step_key: str, workflow: str) -> None:
    """A start request's step key and workflow name, refused as the start client refuses
    them (WorkflowStartError)."""
    try:
        check_workflow_name(workflow)
    except YsError as exc:
        raise WorkflowStartError("INVALID_ARGUMENT", exc.message) from None
    if not isinstance(step_key, str) or not step_key:
        raise WorkflowStartError("INVALID_START_PARAMETERS", "a step key must be non-empty text")


def check_effect_request(
    effect_id: Any, operation: Any, input: Any, retry_in: Any = 0.0, now: float | None = None
) -> str:
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
    if (
        isinstance(retry_in, bool)
        or not isinstance(retry_in, int | float)
        or not 0 <= retry_in <= MAX_TIME
    ):  # False for NaN and infinity as well
        raise bad(f"retry_in must be a finite number of seconds >= 0, not {retry_in!r}")
    if now is not None and not now + retry_in <= MAX_TIME:
        raise bad(f"retry_in must end before the year 10000, not {retry_in!r} s from now")
    return enc.canonical


def slot_id(name: str, slot: float) -> str:
    """The execution ID of schedule `name`'s fire for `slot`: `<name>@<slot in UTC>`, so a
    fire repeated after a crash or a catch-up is the same execution, never a second one."""
    d = dt.datetime.fromtimestamp(slot, tz=dt.UTC)
    return f"{name}@{d.strftime('%Y-%m-%dT%H:%M:%SZ')}"


MAX_SCHEDULE_NAME = 128
_SLOT_SUFFIX = len(slot_id("", 0.0))  # "@2026-11-29T03:00:00Z"


def check_schedule_name(name: str) -> None:
    """Printable text without '@', at most MAX_SCHEDULE_NAME characters, each refusal with its reason;
    its fires' IDs (NAME@<slot>) must be valid execution IDs."""
    if not isinstance(name, str) or not name:
        raise InvalidArgument(
            "INVALID_ARGUMENT", "a schedule needs a name: printable text without '@'"
        )
    if len(name) > MAX_SCHEDULE_NAME:
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"the schedule name is {len(name)} characters long; use at most {MAX_SCHEDULE_NAME}",
        )
    if "@" in name:
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"schedule name {name!r} holds '@', which "
            "separates the name from the slot in its fires' IDs; leave it out",
        )
    if not name.isprintable():
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"schedule name {name!r} holds control characters; use printable text",
        )
    size = len(name.encode("utf-8", "surrogatepass"))
    if size + _SLOT_SUFFIX > MAX_ID_BYTES:
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"the schedule name is {size} bytes in UTF-8; "
            f"its fires' IDs (NAME@<slot>) must fit in {MAX_ID_BYTES} bytes, "
            f"so use at most {MAX_ID_BYTES - _SLOT_SUFFIX}",
        )


def check_schedule(
    name: str,
    workflow: str,
    expr: str,
    tz: str,
    catch_up: str,
    overlap: str,
    max_late: float | None,
    jitter: float,
) -> None:
    """A schedule as `ys schedule add` or a script's declaration gives it: INVALID_ARGUMENT
    with the reason for the first thing wrong."""
    check_schedule_name(name)
    check_workflow_name(workflow)
    try:
        cron.validate(expr, tz)
    except ValueError as exc:
        raise InvalidArgument("INVALID_ARGUMENT", str(exc)) from None
    if catch_up not in cron.CATCH_UP:
        raise InvalidArgument("INVALID_ARGUMENT", f"catch-up must be one of {cron.CATCH_UP}")
    if overlap not in cron.OVERLAP:
        raise InvalidArgument("INVALID_ARGUMENT", f"overlap must be one of {cron.OVERLAP}")
    if max_late is not None:
        check_seconds(max_late, "max_late")
    check_seconds(jitter, "jitter")


# -- failure handlers (docs/design.md, "Workflow options") -----------------------------------------------------------

SUFFIX = ".on-failure"
CONTEXT_KEY = "on_failure_of"


def handler_id(of: str) -> str:
    """`<of>.on-failure`; an ID too long for that keeps its head and a hash of the whole, so it
    stays within 256 bytes and still names one failure."""
    whole = of + SUFFIX
    if len(whole.encode("utf-8")) <= MAX_ID_BYTES:
        return whole
    digest = "~" + hashlib.sha256(of.encode("utf-8")).hexdigest()[:16]
    room = MAX_ID_BYTES - len((digest + SUFFIX).encode("utf-8"))
    head = of.encode("utf-8")[:room].decode("utf-8", "ignore")
    return head + digest + SUFFIX


# -- tags ---------------------------------------------------------------------------------------
# Tags are a string-to-string map on an execution's record, copied to its children and its
# retries, and filtered on by `ys list --tag k=v` (through an index: one row per tag).

MAX_TAGS = 32
MAX_TAG_KEY = 64  # characters
MAX_TAG_VALUE = 256
_TAG_KEY = re.compile(r"^[A-Za-z0-9_.:/-]+$")


def check_tags(tags: Any, what: str = "tags") -> dict[str, str]:
    """A tag map: at most 32 tags, each key 1..64 of letters, digits and `_.:/-`, each value
    text up to 256 characters without control characters. Raises INVALID_ARGUMENT naming the
    tag."""
    if tags is None:
        return {}
    if not isinstance(tags, dict):
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"{what} must be an object of text to text, not {json_kind(tags)}"
        )
    if len(tags) > MAX_TAGS:
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"{what}: {len(tags)} tags given; at most {MAX_TAGS} are allowed"
        )
    for key, value in tags.items():
        if not isinstance(key, str) or not key:
            raise InvalidArgument("INVALID_ARGUMENT", f"{what}: a tag key must be non-empty text")
        if len(key) > MAX_TAG_KEY or not _TAG_KEY.fullmatch(key):
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                f"{what}: tag key {key[:80]!r} is not valid: use 1 to {MAX_TAG_KEY} letters, "
                "digits, '_', '.', ':', '/' or '-'",
            )
        if not isinstance(value, str):
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"{what}: tag {key!r} must be text, not {json_kind(value)}"
            )
        if len(value) > MAX_TAG_VALUE or not value.isprintable():
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                f"{what}: tag {key!r} must be at most {MAX_TAG_VALUE} printable characters",
            )
    return dict(tags)


def parse_tag(text: str) -> tuple[str, str]:
    """`k=v` (the CLI's --tag and the API's tag query) as (key, value), checked."""
    key, sep, value = text.partition("=")
    if not sep:
        raise InvalidArgument("INVALID_ARGUMENT", f"tag {text[:80]!r} must be written key=value")
    check_tags({key: value}, "tag")
    return key, value


RETRY_STATUSES = (
    "failed",
    "cancelled",
)  # what a retry by status takes (docs/design.md, "Retries and bulk commands")
CANCEL_STATUSES = (
    "admitted",
    "running",
    "suspended",
)  # a cancel by status (docs/design.md, "Retries and bulk commands")


def check_cancel_status(status: Any, what: str = "--status") -> str:
    """A cancel by status takes the statuses that are not finished: a finished execution
    has nothing left to cancel."""
    if status not in CANCEL_STATUSES:
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"{what} {status!r}: a cancel by status takes admitted, running or suspended "
            "executions only (a finished one has nothing to cancel)",
        )
    return str(status)


def check_retry_status(status: Any, what: str = "--status") -> str:
    """A retry by status retries failures only: a completed execution is retried by its ID."""
    if status not in RETRY_STATUSES:
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"{what} {status!r}: a retry by status takes failed or cancelled executions only; "
            "retry any other finished one by its ID (`ys retry ID`)",
        )
    return str(status)
