"""The typed request of every route that reads a body or query parameters.

Each route that reads a body or a query reads it here, first (`await X.read(request)`),
before it looks at the delivery token, the registry or the store: a field of the wrong type
or out of range is 400 INVALID_ARGUMENT naming the field, and nothing else runs (api_base.Body
and Query do the field checks). What the spec gives its own code keeps it: start params are checked by the
start client (INVALID_START_PARAMETERS), effect requests by the effect client
(INVALID_EFFECT_REQUEST), durable values by the codec. Unknown fields are ignored, so an older
daemon still serves a newer client. Routes documented without a body (shutdown, wake,
cancel, lease, pause, resume) do not read one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ys import values
from ys.contract import (
    check_execution_id,
    check_retry_status,
    check_tags,
    check_workflow_name,
    parse_tag,
)
from ys.cron import CATCH_UP, OVERLAP, zone_name
from ys.daemon.api_base import Body, Query, invalid
from ys.outcomes import outcome_of
from ys.store.protocols import STATUSES, AdmissionContext
from ys.values import StepWrite, UserObject

MAX_WAIT = 60.0  # a long poll answers at least this often
STEP_STATUSES = ("completed", "failed", "waiting")
EFFECT_STATUSES = ("pending", "settled", "conflict")


# -- executions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trigger:
    workflow: str
    params: UserObject | None
    context: AdmissionContext | None
    execution_id: str | None
    if_exists: str
    tags: dict[str, str]
    due_in: float | None = None  # due this many seconds after admission (`--in`)
    due_at: float | None = None  # due at this time, epoch seconds (`--at`); past: due now

    @classmethod
    async def read(cls, request: web.Request) -> Trigger:
        b = await Body.read(request)
        if b.has("due_in") and b.has("due_at"):
            raise invalid("give due_in or due_at, not both")
        due_in = b.opt_seconds("due_in")
        if due_in == 0:
            raise invalid("due_in must be more than 0 seconds (leave it out to run now)")
        context = b.opt_object("context")
        if context is not None and "traceparent" in context:
            from ys.tracing import parse

            if not isinstance(context["traceparent"], str) or parse(context["traceparent"]) is None:
                raise invalid(
                    "context.traceparent must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)"
                )
        return cls(
            workflow=check_workflow_name(b.required_text("workflow")),
            params=b.opt_object("params"),
            context=AdmissionContext.of(context),
            execution_id=b.opt_text("execution_id"),
            if_exists=b.choice("if_exists", ("fail", "use-existing"), "fail"),
            tags=check_tags(b.any("tags")),
            due_in=due_in,
            due_at=b.opt_time("due_at"),
        )

    def due(self, now: float) -> float | None:
        """The first wake's time, or None: due at once."""
        return now + self.due_in if self.due_in is not None else self.due_at


@dataclass(frozen=True)
class RetryRequest:
    new_id: str | None  # the body's `execution_id`: the retry's ID (default `<ID>.rN`)
    from_step: str | None
    params: UserObject | None  # None: the original's
    again: bool = True  # false: an original that has a retry is not retried again
    if_status: str | None = None  # a retry by status (`ys retry --status`): failed/cancelled

    @classmethod
    async def read(cls, request: web.Request) -> RetryRequest:
        b = await Body.read(request)
        new_id = b.opt_text("execution_id")
        if new_id is not None:
            check_execution_id(new_id, "execution_id (the retry's ID)")
        if_status = b.opt_text("if_status")
        if if_status is not None:
            check_retry_status(if_status, "if_status")
        again = True if not b.has("again") else b.flag("again")
        return cls(new_id, b.opt_text("from"), b.opt_object("params"), again, if_status)


def list_tags(texts: list[str]) -> dict[str, str]:
    """`tag=k=v` query parameters as one map; a key given twice is refused (no execution
    has two values for it)."""
    tags: dict[str, str] = {}
    for text in texts:
        key, value = parse_tag(text)
        if key in tags and tags[key] != value:
            raise invalid(f"tag {key!r} is given twice with different values")
        tags[key] = value
    return tags


@dataclass(frozen=True)
class ListQuery:
    statuses: list[str]
    workflow: str | None
    parent: str | None
    limit: int
    page_token: str | None
    tags: dict[str, str]
    since: float | None  # admitted at most this many seconds ago
    until: float | None  # admitted more than this many seconds ago

    @classmethod
    def read(cls, request: web.Request) -> ListQuery:
        q = Query(request)
        statuses = q.texts("status")
        bad = [s for s in statuses if s not in STATUSES]
        if bad:
            raise invalid(f"status {bad[0]!r} is not one of {', '.join(STATUSES)}")
        since, until = q.seconds("since", -1.0), q.seconds("until", -1.0)
        return cls(
            statuses,
            q.text("workflow"),
            q.text("parent"),
            q.whole("limit", 100),
            q.text("page_token"),
            list_tags(q.texts("tag")),
            since if since >= 0 else None,
            until if until >= 0 else None,
        )


@dataclass(frozen=True)
class HistoryQuery:
    limit: int
    page_token: str | None

    @classmethod
    def read(cls, request: web.Request) -> HistoryQuery:
        q = Query(request)
        return cls(q.whole("limit", 100), q.text("page_token"))


@dataclass(frozen=True)
class WaitQuery:
    timeout: float  # seconds, at most MAX_WAIT
    after: int | None  # answer once the history is longer than this

    @classmethod
    def read(cls, request: web.Request) -> WaitQuery:
        q = Query(request)
        return cls(min(MAX_WAIT, q.seconds("timeout", 30.0)), q.opt_whole("after"))


# -- the worker's calls -----------------------------------------------------------------------


def step_of(b: Body) -> StepWrite:
    """A worker's step save, from a body already read (the route's, or a worker channel
    request); its value is canonical JSON text (the worker encodes it)."""
    return StepWrite(
        b.text("kind", "run"),
        b.choice("status", STEP_STATUSES, "completed"),
        b.opt_text("value"),
        b.whole("attempts", 1, least=1),
        b.opt_time("wake_at"),
    )


async def read_step(request: web.Request) -> StepWrite:
    return step_of(await Body.read(request))


@dataclass(frozen=True)
class StepDeadline:
    """A worker's word that one attempt of a step may run `timeout` seconds (docs/design.md, "Workflow options")."""

    timeout: float
    attempts: int
    retry_delay: float | None  # the retry policy's delay after this attempt; None: no retry

    @classmethod
    async def read(cls, request: web.Request) -> StepDeadline:
        return cls.of(await Body.read(request))

    @classmethod
    def of(cls, b: Body) -> StepDeadline:
        timeout = b.opt_seconds("timeout")
        if timeout is None or timeout <= 0:
            raise invalid("timeout is required: the attempt's limit in seconds, above 0")
        return cls(timeout, b.whole("attempts", 1, least=1), b.opt_seconds("retry_delay"))


@dataclass(frozen=True)
class Start:
    workflow: str
    params: Any  # the start client checks them (INVALID_START_PARAMETERS)
    detached: bool
    params_json: str | None = None  # the worker's canonical params; wins over params

    @classmethod
    async def read(cls, request: web.Request) -> Start:
        return cls.of(await Body.read(request))

    @classmethod
    def of(cls, b: Body) -> Start:
        return cls(
            b.required_text("workflow"),
            b.any("params"),
            b.flag("detached"),
            b.opt_text("params_json"),
        )


@dataclass(frozen=True)
class Outcome:
    sent: dict[str, object] | None  # the WorkflowRunOutcome object as sent

    @classmethod
    async def read(cls, request: web.Request) -> Outcome:
        # Its type before the token; a missing outcome after it (`{}` asks which token).
        return cls.of(await Body.read(request))

    @classmethod
    def of(cls, b: Body) -> Outcome:
        return cls(b.opt_object("outcome"))

    def outcome(self) -> values.Outcome:
        """The outcome sent, read into its fields (after the token is checked)."""
        if self.sent is None:
            raise invalid('outcome is required (an object: {"status": ...})')
        return outcome_of(self.sent)


# -- durable values ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ValuePut:
    value: Any  # a durable value, checked by the store
    expected_version: int | None

    @classmethod
    async def read(cls, request: web.Request) -> ValuePut:
        b = await Body.read(request)
        if not b.has("value"):
            raise invalid("value is required (a durable value; null is one)")
        return cls(b.any("value"), b.opt_whole("expected_version"))


@dataclass(frozen=True)
class ValueWait:
    execution_id: str
    step_key: str
    seen: int  # the version the waiter has seen: a newer one ends the wait
    timeout_at: float | None

    @classmethod
    async def read(cls, request: web.Request) -> ValueWait:
        return cls.of(await Body.read(request))

    @classmethod
    def of(cls, b: Body) -> ValueWait:
        return cls(
            b.required_text("execution_id"),
            b.required_text("step_key"),
            b.whole("seen", 0),
            b.opt_time("timeout_at"),
        )


# -- schedules and housekeeping ---------------------------------------------------------------


def schedule_rule(b: Body) -> str:
    """The rule of `cron` or `every` (seconds), exactly one of them (an interval is stored as
    ys.cron.every_rule says)."""
    from ys.cron import every_rule

    every = b.opt_seconds("every")
    if (b.any("cron") is None) == (every is None):
        raise invalid("give exactly one of cron (an expression) and every (seconds)")
    if every is None:
        return b.required_text("cron")
    try:
        return every_rule(every)
    except ValueError as exc:
        raise invalid(str(exc)) from None


@dataclass(frozen=True)
class ScheduleAdd:
    name: str
    workflow: str
    cron: str
    tz: str
    params: UserObject | None
    catch_up: str
    overlap: str
    max_late: float | None
    jitter: float

    @classmethod
    async def read(cls, request: web.Request) -> ScheduleAdd:
        b = await Body.read(request)
        return cls(
            name=b.required_text("name"),
            workflow=check_workflow_name(b.required_text("workflow")),
            cron=schedule_rule(b),
            tz=zone_name(b.text("tz", "local")),
            params=b.opt_object("params"),
            catch_up=b.choice("catch_up", CATCH_UP, "once"),
            overlap=b.choice("overlap", OVERLAP, "skip"),
            max_late=b.opt_seconds("max_late"),
            jitter=b.seconds("jitter", 0.0),
        )


@dataclass(frozen=True)
class ScheduleSet:
    """`schedule set`: only the fields given change (None: as it is; cron or every replaces
    the rule)."""

    rule: str | None = None
    tz: str | None = None
    params: UserObject | None = None
    catch_up: str | None = None
    overlap: str | None = None
    max_late: float | None = None
    jitter: float | None = None

    @classmethod
    async def read(cls, request: web.Request) -> ScheduleSet:
        b = await Body.read(request)

        def given(name: str) -> bool:
            return b.any(name) is not None

        changes = cls(
            rule=schedule_rule(b) if given("cron") or given("every") else None,
            tz=zone_name(b.text("tz", "local")) if given("tz") else None,
            params=b.opt_object("params") if given("params") else None,
            catch_up=b.choice("catch_up", CATCH_UP, "once") if given("catch_up") else None,
            overlap=b.choice("overlap", OVERLAP, "skip") if given("overlap") else None,
            max_late=b.opt_seconds("max_late") if given("max_late") else None,
            jitter=b.seconds("jitter", 0.0) if given("jitter") else None,
        )
        if changes == cls():
            raise invalid(
                "nothing to change; give --cron or --every, --tz, params, --catch-up, "
                "--max-late, --overlap or --jitter"
            )
        return changes


@dataclass(frozen=True)
class Gc:
    older_than: float | None  # seconds; None: the configured retention
    dry_run: bool

    @classmethod
    async def read(cls, request: web.Request) -> Gc:
        b = await Body.read(request)
        return cls(b.opt_seconds("older_than"), b.flag("dry_run"))


# -- effects ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EffectsQuery:
    status: str | None
    execution_id: str | None

    @classmethod
    def read(cls, request: web.Request) -> EffectsQuery:
        q = Query(request)
        status = q.text("status")
        if status not in (None, *EFFECT_STATUSES):
            raise invalid(f"status must be {', '.join(EFFECT_STATUSES)}, not {status!r}")
        return cls(status, q.text("execution"))


@dataclass(frozen=True)
class EffectBegin:
    operation: Any  # the effect client checks operation and input (INVALID_EFFECT_REQUEST)
    input: Any
    execution_id: str
    step_key: str

    @classmethod
    async def read(cls, request: web.Request) -> EffectBegin:
        return cls.of(await Body.read(request))

    @classmethod
    def of(cls, b: Body) -> EffectBegin:
        return cls(
            b.any("operation"),
            b.any("input"),
            b.required_text("execution_id"),
            b.required_text("step_key"),
        )


@dataclass(frozen=True)
class EffectSettle:
    operation: str
    result: str  # canonical JSON text

    @classmethod
    async def read(cls, request: web.Request) -> EffectSettle:
        return cls.of(await Body.read(request))

    @classmethod
    def of(cls, b: Body) -> EffectSettle:
        return cls(b.required_text("operation"), b.required_text("result"))


@dataclass(frozen=True)
class EffectWait:
    execution_id: str
    step_key: str
    wake_at: float

    @classmethod
    async def read(cls, request: web.Request) -> EffectWait:
        return cls.of(await Body.read(request))

    @classmethod
    def of(cls, b: Body) -> EffectWait:
        return cls(b.required_text("execution_id"), b.required_text("step_key"), b.time("wake_at"))
