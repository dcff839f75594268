"""The JSON shapes of the rows read for people (ys/store/reading.py) as the API and the
dashboard show them (docs/API.md): TypedDicts, the edge's types, built by ys/daemon/views.py.
Times are ISO 8601 text (None where a time is not set)."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class HistoryEventJson(TypedDict):
    seq: int
    at: str | None
    kind: str
    data: dict[str, object]  # the event's data, its times in ISO 8601


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
