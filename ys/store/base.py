"""The values the store's protocols take and return (`ys.store.protocols`), the same for every
adapter. The contract's checks are in `ys.contract`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypedDict, TypeVar

from ys.store.eventdata import Parent as Parent
from ys.store.reading import FailedAttempt, PastDelivery
from ys.store.records import Record
from ys.values import EffectStateJson, StepWrite, UserJson, UserObject, ValueFoundJson

DEFAULT_PAGE = 100
MAX_PAGE = 1000
SLOTS_KEPT = 100  # schedule slots whose outcome is kept, per schedule, newest first

# A write's answer, called on the writer's thread once it is committed: (result, None), or
# (None, the error that refused it). Quick and never blocking (`save_step_then`).
Then = Callable[[Any, BaseException | None], None]


@dataclass(frozen=True)
class AdmissionContext:
    """An execution's `context` object as it is admitted (docs/design.md, "Wire formats"): the
    fields ys writes and reads itself, and the caller's own (`ys.trigger(context=...)`, the
    HTTP body's `context`), kept as given. `of` and `to_json` are inverses, so the stored text
    (canonical JSON) is the caller's object exactly."""

    schedule: str | None = None  # the schedule that fired it
    manual: bool = False  # fired by `ys schedule run`, outside the schedule's slots
    traceparent: str | None = None  # the caller's W3C trace context (docs/design.md, "Traces")
    own: UserObject = field(default_factory=dict)  # the caller's other fields, opaque to ys

    @classmethod
    def of(cls, given: UserObject | None) -> AdmissionContext | None:
        """The caller's object read into its fields (a field of another type than ys writes
        stays the caller's own); None for None."""
        if given is None:
            return None
        own = dict(given)
        schedule = own.pop("schedule") if isinstance(own.get("schedule"), str) else None
        manual = own.pop("manual") if own.get("manual") is True else False
        trace = own.pop("traceparent") if isinstance(own.get("traceparent"), str) else None
        return cls(schedule, manual, trace, own)

    def to_json(self) -> UserObject:
        out = dict(self.own)
        if self.schedule is not None:
            out["schedule"] = self.schedule
        if self.manual:
            out["manual"] = True
        if self.traceparent is not None:
            out["traceparent"] = self.traceparent
        return out


# The records of an export (`ys export`, `ys import`, `ys migrate`): each is one line of the
# export file, its wire format (ys/store/sql/transfer.py, docs/design.md "Keeping and moving the
# data"). A cell is a column's value as the format has it: canonical JSON stays text, flags
# are booleans, bytes are base64.
Cell = str | int | float | bool | None
Row = dict[str, Cell]  # one row of a table, by column name


class ExecutionLine(TypedDict):
    """An execution with its own rows (`transfer.PARTS`, one list each)."""

    kind: str  # "execution"
    execution: Row
    events: list[Row]
    steps: list[Row]
    starts: list[Row]
    effect_begins: list[Row]
    effect_waits: list[Row]
    value_waits: list[Row]
    logs: list[Row]


# A script, value, effect or schedule: its `kind`, its row's columns and its parts' lists
# (`transfer.KINDS`).
RecordLine = dict[str, Cell | list[Row]]
ExportLine = ExecutionLine | RecordLine


class AdmitOptions(TypedDict, total=False):
    """The options of an admission, written once for `admit` and `admit_async` (keyword
    arguments; each left out takes its default)."""

    context: AdmissionContext | None  # None: {}
    execution_id: str | None  # None: a new ID (`<workflow>-<time><random>`)
    if_exists: str  # "fail" (the default) or "use-existing"
    parent: Parent | None  # the execution whose step started this one
    now: float | None  # the admission time; None: the store's clock
    tags: dict[str, str] | None
    due_at: float | None  # its first wake; None or past: due at once


@dataclass(frozen=True)
class Admission:
    execution_id: str
    started: bool
    delivery: Delivery | None = None  # claimed in the admission's transaction (lease_seconds)


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
    pinned: bool = (
        False  # it runs its admission's version, whether or not the script is still there
    )
    deadline_at: float | None = None  # when the execution times out (its workflow's timeout)
    state: RunState | None = None  # what its worker starts from, read by the claim


class Claimed(list[Delivery]):
    """A claim's deliveries, and `ended`: the executions its sweep of lost leases ended (their
    last attempt was lost: they failed, their failure handlers admitted), whose waiters the
    claiming daemon tells, as for any end it makes."""

    def __init__(self, deliveries: Iterable[Delivery] = (), ended: Iterable[str] = ()) -> None:
        super().__init__(deliveries)
        self.ended = tuple(ended)


@dataclass(frozen=True)
class RunState:
    """What a delivery's worker starts from, read in its claim's transaction: the params and
    context as admitted (canonical JSON) and the steps recorded so far, in the order they
    were first recorded. It travels with the worker's launch (no read of its own)."""

    params_json: str
    context_json: str
    steps: list[StepRecord]


@dataclass(frozen=True)
class ConcurrencyLimit:
    """A workflow's `concurrency=N` (and `key=FIELD`): at most `n` of its executions hold a
    lease at once, per value of `params[key]` when `key` is set. Recorded with the workflow's
    current script (`set_script(options=ScriptOptions(...))`), which every daemon's claims
    read, so an edited limit applies to executions already queued, on every box."""

    n: int
    key: str | None = None


@dataclass(frozen=True)
class ScriptOptions:
    """What the store keeps of a workflow's options with its current script (`set_script`),
    for every daemon on the database to apply alike: its concurrency limit (`concurrency`,
    `key`: the claim's), its cap on deliveries without an outcome (`max_attempts`: a lease
    swept by any daemon counts) and the workflow its failure admits (`on_failure`)."""

    concurrency: int | None = None
    key: str | None = None
    max_attempts: int | None = None
    on_failure: str | None = None


# The slot an execution of a limited workflow takes: the canonical JSON of `params[key]`, or
# one of these (neither is JSON text, so no parameter value can take them).
SLOT_ALL = "*"  # a limit without a key: one slot group for the whole workflow
SLOT_MISSING = "missing"  # params has no `key` field (or is no object): a value of its own


SLOT_TEXT_MAX = 256  # a key value's canonical JSON up to this many bytes names its group


def slot_of(params_json: str, key: str | None) -> str:
    """The slot group of an execution with these params under a limit keyed by `key`."""
    if key is None:
        return SLOT_ALL
    import json

    try:
        params = json.loads(params_json)
    except ValueError:
        return SLOT_MISSING
    if not isinstance(params, dict) or key not in params:
        return SLOT_MISSING
    text = json.dumps(params[key], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode("utf-8", "surrogatepass")) <= SLOT_TEXT_MAX:
        return text
    # A long value is named by its hash: a slot is an index key (PostgreSQL refuses a btree
    # entry past ~2.7 KB, which would fail every claim), and equal values hash alike.
    import hashlib

    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class StepRecord:
    key: str
    kind: str
    status: str  # completed | failed | waiting
    value: str | None  # canonical encoding of the result or the tagged error
    attempts: int
    wake_at: float | None
    updated_at: float

    @property
    def write(self) -> StepWrite:
        """The step as it was saved (what a worker replays from)."""
        return StepWrite(self.kind, self.status, self.value, self.attempts, self.wake_at)


@dataclass(frozen=True)
class RunningExecution:
    record: Record
    claimed_at: float | None  # when the current delivery began
    lease_expires_at: float | None


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a read: its items and the token of the next page (None: the last)."""

    items: list[T]
    next_page_token: str | None


@dataclass
class Description:
    record: Record
    history_bytes: int
    steps: list[StepRecord] = field(default_factory=list)
    deliveries: list[PastDelivery] = field(default_factory=list)
    children: list[Record] = field(default_factory=list)
    lease_expires_at: float | None = None
    failed_attempts: dict[str, list[FailedAttempt]] = field(default_factory=dict)  # by key
    retries: list[str] = field(default_factory=list)  # its retries, oldest admitted first


@dataclass(frozen=True)
class SharedCounts:
    """What every daemon on one database reports alike (the metrics' shared figures)."""

    executions: dict[tuple[str, str], int] = field(default_factory=dict)  # (workflow, status)
    effects: dict[str, int] = field(default_factory=dict)  # by status
    due: int = 0  # due now and not leased
    oldest_due_at: float | None = None
    script_waiting: int = 0  # waiting for their script (broken or missing): not due, not leased


# How much of a delivery's log the database keeps (ys logs on another box shows it)
LOG_TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class LogTail:
    """The end of one delivery's log as the database keeps it."""

    attempt: int
    daemon_id: str  # the daemon that ran it
    path: str  # its whole log, on that daemon's box
    size: int  # the whole log's size in bytes
    tail: bytes  # its last LOG_TAIL_BYTES at most
    ended_at: float


@dataclass(frozen=True)
class Retry:
    """What a retry admitted: the new execution, the one it retries, and the keys of the
    steps copied into its history (they replay without running). `started` is False when a
    retry asked not to repeat one found the original already retried: `execution_id` is then
    that retry, nothing was admitted."""

    execution_id: str
    retry_of: str
    copied_steps: list[str]
    started: bool = True


@dataclass(frozen=True)
class Schedule:
    """One cron schedule as stored (times are epoch seconds; the API shows them in ISO 8601)."""

    name: str
    workflow: str
    cron: str  # a cron expression, or an interval rule (ys.cron.every_rule)
    tz: str
    params: Any  # decoded
    catch_up: str  # skip | once | all
    max_late: float | None
    overlap: str  # skip | queue | allow
    jitter: float
    paused: bool
    source: str  # cli | script | api
    cursor: float  # slots up to here are done
    next_fire_at: float | None
    last_fire_at: float | None
    last_slot: float | None
    last_execution_id: str | None
    queued_slot: float | None  # a fire waiting behind a running execution (overlap queue)
    created_at: float


@dataclass(frozen=True)
class ScheduleAction:
    """One thing a tick did: `fired` (slot, execution_id, catch_up or queued), `queued` (slot),
    `skipped` (slot, why), `missed` (slot, reason, handler), `caught_up` (policy, fired) or
    `refused` (why)."""

    action: str
    slot: float | None = None
    execution_id: str | None = None
    catch_up: bool = False
    queued: bool = False
    why: str | None = None
    reason: str | None = None
    handler: str | None = None  # the failure handler a missed slot admitted
    policy: str | None = None
    fired: int = 0


@dataclass(frozen=True)
class EffectConflict:
    result: Any  # decoded, the first (kept) result
    conflicting_result: Any
    at: float


@dataclass(frozen=True)
class EffectBegin:
    """An execution's step that began an effect, and when."""

    execution_id: str
    step_key: str
    at: float


@dataclass(frozen=True)
class EffectWaiter:
    """An execution's step waiting for an effect to settle, and its wake."""

    execution_id: str
    step_key: str
    wake_at: float


@dataclass(frozen=True)
class Effect:
    """One effect record; `began_by` and `waiters` are read for one effect, None in a list."""

    effect_id: str
    operation: str
    input: Any  # decoded
    status: str  # pending | settled
    result: Any  # decoded; None while pending
    created_at: float
    settled_at: float | None
    conflicts: tuple[EffectConflict, ...] = ()
    began_by: tuple[EffectBegin, ...] | None = None
    waiters: tuple[EffectWaiter, ...] | None = None


@dataclass(frozen=True)
class EffectState:
    """What a begin or a settle of an effect answers: `new` or `pending` (begun, not settled),
    `settled` with the result, or `conflict` (a settle with another result: the first one
    kept, the other reported)."""

    status: str  # new | pending | settled | conflict
    result_json: str | None = None  # canonical JSON of the settled result
    conflicting_json: str | None = None  # a conflicting settle's result

    def to_json(self) -> EffectStateJson:
        """The answer on the wire (the worker channel, the HTTP route)."""
        out: EffectStateJson = {"status": self.status}
        if self.result_json is not None:
            out["result"] = self.result_json
        if self.conflicting_json is not None:
            out["conflicting_result"] = self.conflicting_json
        return out


@dataclass(frozen=True)
class StoredValue:
    """A durable value at its current version (`value_get`)."""

    key: str
    value: UserJson  # decoded
    version: int
    updated_at: float


@dataclass(frozen=True)
class ValueEntry:
    """A key in a list of durable values: its version and time, not its value."""

    key: str
    version: int
    updated_at: float


@dataclass(frozen=True)
class ValueWritten:
    """A put's answer: the version it committed and how many waiters it woke."""

    key: str
    version: int
    updated_at: float
    woken: int


@dataclass(frozen=True)
class ValueFound:
    """A wait's answer when the key is at a newer version: the value as canonical JSON text,
    which the waiting step saves as its result unchanged."""

    key: str
    value_json: str
    version: int
    updated_at: float

    def to_json(self) -> ValueFoundJson:
        """The answer on the wire (the worker channel, the HTTP route)."""
        return {
            "key": self.key,
            "value": self.value_json,
            "version": self.version,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True)
class ValueWaiter:
    """An execution's step waiting for a key to pass a version."""

    key: str
    execution_id: str
    step_key: str
    seen_version: int
    since: float
