"""The JSON shapes of the rows read for people (ys/store/reading.py) as the API and the
dashboard show them (docs/API.md): TypedDicts, the edge's types, built by ys/daemon/views.py.
Times are ISO 8601 text (None where a time is not set)."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from ys.values import OutcomeJson, UserJson


class HistoryEventJson(TypedDict):
    seq: int
    at: str | None
    kind: str
    data: dict[str, object]  # the event's data, its times in ISO 8601


class StreamEventJson(HistoryEventJson):
    """One event of `GET /v1/events`: the history's shape with its execution and cursor."""

    execution_id: str
    workflow: str
    cursor: str


class SlotJson(TypedDict):
    name: str
    slot: str | None
    outcome: str
    why: str | None
    execution_id: str | None
    at: str | None
    count: int


class SlotHistoryJson(TypedDict):
    slot: str | None
    outcome: str
    mark: str
    why: str | None
    execution_id: str | None
    status: str | None
    at: str | None
    count: int
    lateness: float | None


class BucketJson(TypedDict):
    start: str | None
    started: int
    completed: int
    failed: int


class HourJson(TypedDict):
    start: str | None
    count: int
    p50: float | None
    p95: float | None


class StoreWaitJson(TypedDict):
    kind: Literal["store"]
    key: str
    step_key: str
    since: str | None


class EffectWaitJson(TypedDict):
    kind: Literal["effect"]
    effect_id: str
    step_key: str
    wake_at: str | None


class ConcurrencyWaitJson(TypedDict):
    kind: Literal["concurrency"]
    workflow: str
    slot: str


WaitJson = StoreWaitJson | EffectWaitJson | ConcurrencyWaitJson


class ValueWaiterJson(TypedDict):
    key: str
    execution_id: str
    step_key: str
    seen_version: int
    since: str | None


class PastDeliveryJson(TypedDict):
    attempt: int | None
    started_at: str | None
    ended_at: str | None
    outcome: str | None
    script_sha256: str | None
    detail: NotRequired[str]  # only where it said something when released
    warnings: NotRequired[list[str]]  # only where it warned


class DatabaseJson(TypedDict):
    path: str
    bytes: int
    schema_version: int


class BreakJson(TypedDict):
    start: str | None
    end: str | None
    x0: float  # where it begins and ends on the axis, as shares of it
    x1: float
    seconds: float


class BarJson(TypedDict):
    kind: str  # run | wait | backoff
    outcome: str
    start: str | None
    end: str | None
    open: bool
    error: str | None
    wake_at: str | None
    x0: float
    x1: float
    seconds: float


class RowJson(TypedDict):
    kind: str  # delivery | step | child
    label: str
    step_kind: NotRequired[str | None]  # a step's row only
    link: NotRequired[str]  # the child it called, or the child itself
    bars: list[BarJson]


class TimelineJson(TypedDict):
    execution_id: str
    status: str
    start: str | None
    end: str | None
    now: str | None
    breaks: list[BreakJson]
    rows: list[RowJson]
    rows_left: int


# -- executions, steps, effects and schedules (ys/daemon/views.py) ------------------------------


class RecordJson(TypedDict):
    """An execution record; the routes add what they know beside it (NotRequired)."""

    execution_id: str
    workflow: str
    status: str
    params: UserJson  # None where the read left them out
    context: UserJson
    outcome: OutcomeJson | None
    admitted_at: str | None
    updated_at: str | None
    due_at: str | None
    attempts: int
    parent: dict[str, str | bool] | None  # Parent.to_json
    cancel_requested: bool
    script_sha256: str | None
    tags: dict[str, str]
    retry_of: str | None
    retried_by: str | None
    lease_holder: NotRequired[str]
    waiting_for: NotRequired[str]
    history_length: NotRequired[int]
    changed: NotRequired[bool]  # a cancel's reply
    waiting_on: NotRequired[list[WaitJson]]  # describe, and the overview's suspended ones
    script_sha256_now: NotRequired[str | None]  # describe
    script_changed: NotRequired[bool]  # describe


class RunningJson(RecordJson):
    """A running execution in the overview."""

    claimed_at: str | None
    lease_expires_at: str | None
    pid: int | None


class FailedAttemptJson(TypedDict):
    attempt: int
    at: str | None
    error: UserJson


class StepJson(TypedDict):
    key: str
    kind: str
    status: str
    attempts: int
    wake_at: str | None
    updated_at: str | None
    failed_attempts: list[FailedAttemptJson]
    value: NotRequired[UserJson]  # only where the step saved one


class ChildJson(TypedDict):
    execution_id: str
    workflow: str
    status: str
    step_key: str | None
    detached: bool


class ConflictJson(TypedDict):
    result: UserJson
    conflicting_result: UserJson
    at: str | None


class BeganByJson(TypedDict):
    execution_id: str
    step_key: str
    at: str | None


class EffectWaiterJson(TypedDict):
    execution_id: str
    step_key: str
    wake_at: str | None


class EffectJson(TypedDict):
    effect_id: str
    operation: str
    input: UserJson
    status: str
    result: UserJson
    created_at: str | None
    settled_at: str | None
    conflicts: list[ConflictJson]
    began_by: NotRequired[list[BeganByJson]]
    waiters: NotRequired[list[EffectWaiterJson]]


class DescribeJson(RecordJson):
    """`describe`: the record with its steps, children, effects and deliveries."""

    history_bytes: int
    lease_expires_at: str | None
    steps: list[StepJson]
    children: list[ChildJson]
    effects: list[EffectJson]
    retries: list[str]
    deliveries: list[PastDeliveryJson]


class ScheduleJson(TypedDict):
    name: str
    workflow: str
    cron: str | None
    every: int | None
    tz: str
    params: UserJson
    catch_up: str
    overlap: str
    max_late: float | None
    jitter: float
    paused: bool
    source: str
    next_fire_at: str | None
    last_fire_at: str | None
    last_execution_id: str | None
    queued: bool
    next: NotRequired[list[str | None]]  # the dashboard's next fires
    slots: NotRequired[list[SlotJson]]
    history: NotRequired[list[SlotHistoryJson]]


class TriggeredJson(TypedDict):
    """The answer to `POST /v1/executions`."""

    execution_id: str
    started: bool
    warning: NotRequired[str]  # admitted for a script that cannot run until it is fixed


# -- the overview (ys/daemon/overview.py, `GET /v1/overview`) ----------------------------------


class DaemonInfoJson(TypedDict):
    version: str
    pid: int
    started_at: str | None
    uptime_seconds: float
    concurrency: int
    database: DatabaseJson
    last_gc_at: str | None
    workflows: int
    workflow_errors: int


class ActivityJson(TypedDict):
    day: list[BucketJson]  # 10-minute buckets
    hour: list[BucketJson]  # 1-minute buckets


class OverviewJson(TypedDict):
    now: str | None
    daemon: DaemonInfoJson
    counts: dict[str, int]
    running: list[RunningJson]
    due: list[RecordJson]
    waiting: list[RecordJson]
    failures: list[RecordJson]
    activity: ActivityJson
    durations: list[HourJson]
    slots: list[SlotJson]
