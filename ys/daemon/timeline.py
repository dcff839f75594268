"""Where an execution spent its time, derived from its history: one pure function (`spans`)
that both its OpenTelemetry trace (ys/daemon/tracing.py) and its timeline (the dashboard's
Execution page, `GET /v1/executions/{id}/timeline`, `ys describe --timeline`) are built from.

`layout` places those spans on a time axis: one row per delivery and per step attempt, a
child as a row of its own, idle stretches (nothing running, only waiting) compressed into a
marked break so that a sleep of a day does not squeeze the rest into a hairline.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ys.daemon.shapes import BarJson, BreakJson, RowJson, TimelineJson
from ys.store.protocols import (
    ClaimedData,
    Ending,
    Event,
    FailedData,
    Outcome,
    Record,
    ReleasedData,
    StepData,
)

MAX_ROWS = 200  # rows drawn; the rest are counted
BREAK_SHARE = 0.04  # the width a compressed idle stretch keeps, as a share of the axis


@dataclass(frozen=True)
class Span:
    """One stretch of an execution's time.

    kind: "delivery" (claim to release, suspension or outcome), "attempt" (a run step's
    attempt), "wait" (a step that waits: a sleep, a child, a value, an effect: from when it
    began to when it completed), "backoff" (a failed attempt's wait before its next one).
    `end` is None while it lasts. `delivery` is the delivery it ran in (0: it crossed them)."""

    kind: str
    key: str
    n: int
    start: float
    end: float | None
    status: str
    step_kind: str = ""
    delivery: int = 0
    error: str | None = None
    # what its step event said (a step's span only): its status, its error, when it wakes
    step_status: str | None = None
    step_error: str | None = None
    wake_at: float | None = None


def _told(s: Span, said: StepData | None) -> Span:
    """`s` with what its step event's data said: its status, its error, when it wakes."""
    if said is None:
        return s
    return dataclasses.replace(
        s, step_status=said.status, step_error=error_text(said.error), wake_at=said.wake_at
    )


@dataclass(frozen=True)
class Bar:
    """A span drawn on a row: `kind` run, wait or backoff; x0/x1 its ends as shares of the
    axis (set by `layout` once the breaks are known)."""

    kind: str
    outcome: str
    start: float
    end: float
    open: bool
    error: str | None
    wake_at: float | None
    x0: float = 0.0
    x1: float = 0.0


@dataclass(frozen=True)
class Row:
    """One row of the timeline: a delivery, a step's attempt (`step_kind`; `link` to the
    child it called), or a child (`link` to it)."""

    kind: str  # delivery | step | child
    label: str
    bars: tuple[Bar, ...]
    step_kind: str | None = None
    link: str | None = None


@dataclass(frozen=True)
class Break:
    """An idle stretch compressed on the axis."""

    start: float
    end: float
    x0: float
    x1: float


@dataclass(frozen=True)
class Timeline:
    """`layout`'s answer: times as epoch seconds, the first MAX_ROWS rows and how many are
    left."""

    execution_id: str
    status: str
    start: float
    end: float
    now: float
    breaks: tuple[Break, ...]
    rows: tuple[Row, ...]
    rows_left: int


def error_text(error: Any) -> str | None:
    if isinstance(error, dict):
        return f"{error.get('name', 'Error')}: {error.get('message', '')}".strip()
    return None


def outcome_error_text(outcome: Outcome | None) -> str | None:
    """A failed outcome's error as `error_text` shows it."""
    if outcome is None or outcome.error is None:
        return None
    return error_text(outcome.error.to_json())


def spans(admitted_at: float, events: list[Event]) -> list[Span]:
    """The spans of an execution's history, in the order they ended (open ones last). Pure."""
    out: list[Span] = []
    attempt = 0  # the current delivery's attempt (0: none running)
    delivery_start = 0.0
    previous = admitted_at  # when the code before the next step began
    waiting: dict[str, tuple[float, int]] = {}  # key -> (wait began, delivery it began in)
    tried: dict[str, int] = {}  # run steps: attempts ended so far
    for ev in events:
        d = ev.data
        if isinstance(d, ClaimedData):
            attempt = d.attempt or attempt + 1
            delivery_start = previous = ev.at
            continue
        if isinstance(d, Ending) and attempt:
            how, err = ev.kind, None
            if isinstance(d, ReleasedData):
                how = f"retry ({d.reason})"
                err = d.detail or how
            elif isinstance(d, FailedData):
                err = error_text(d.error)
            out.append(Span("delivery", "", attempt, delivery_start, ev.at, how, error=err))
            attempt = 0
            continue
        if not isinstance(d, StepData):
            continue
        key = d.key
        kind = d.kind or "run"
        status = str(d.status)
        err = error_text(d.error)
        if kind == "run" and (err is not None or status != "waiting"):
            # an attempt of a run step ended: failed (a retry waits), failed, or completed
            n = d.attempts or tried.get(key, 0) + 1
            tried[key] = n
            ended = "failed" if err is not None else status
            span = Span("attempt", key, n, previous, ev.at, ended, kind, attempt, err)
            out.append(_told(span, d))
            if status == "waiting" and d.wake_at is not None:
                wake = d.wake_at
                out.append(Span("backoff", key, n, ev.at, max(wake, ev.at), "waiting", kind, 0))
            previous = ev.at
            continue
        if status == "waiting":
            waiting.setdefault(key, (previous, attempt))
            previous = ev.at
            continue
        began, _ = waiting.pop(key, (previous, attempt))
        # a wait that crossed deliveries belongs to the execution, not one delivery
        same = attempt if began >= delivery_start else 0
        failed = err if status == "failed" else None
        out.append(_told(Span("wait", key, 1, began, ev.at, status, kind, same, failed), d))
        previous = ev.at
    if attempt:
        out.append(Span("delivery", "", attempt, delivery_start, None, "running"))
    last_step = {e.data.key: e.data for e in events if isinstance(e.data, StepData)}
    for key, (began, in_delivery) in waiting.items():
        said = last_step.get(key)
        step_kind = "" if said is None else said.kind or ""
        wait = Span("wait", key, 1, began, None, "waiting", step_kind, in_delivery)
        out.append(_told(wait, said))
    return out


# -- the picture: rows on a time axis, idle stretches compressed --------------------------------


def _outcome(s: Span) -> str:
    if s.end is None:
        return "running" if s.kind in ("delivery", "attempt") else "waiting"
    if s.kind == "delivery":
        return "retry" if s.status.startswith("retry") else s.status
    if s.kind == "backoff":
        return "backoff"
    return "failed" if s.error else ("waiting" if s.status == "waiting" else s.status)


def _bar(s: Span, end: float) -> Bar:
    stop = end if s.end is None else s.end
    return Bar(
        kind={"delivery": "run", "attempt": "run"}.get(s.kind, s.kind),
        outcome=_outcome(s),
        start=s.start,
        end=max(stop, s.start),
        open=s.end is None,
        error=s.error,
        wake_at=s.wake_at,
    )


def _breaks(active: list[tuple[float, float]], start: float, end: float) -> list[list[float]]:
    """Idle stretches (no delivery running) long enough to compress: each longer than 1 s and
    than a quarter of everything else left on the axis."""
    gaps: list[list[float]] = []
    t = start
    for a, b in sorted(active):
        if a > t:
            gaps.append([t, a])
        t = max(t, b)
    if end > t:
        gaps.append([t, end])
    kept = end - start
    chosen = []
    for g in sorted(gaps, key=lambda g: g[0] - g[1]):
        length = g[1] - g[0]
        if length > 1.0 and length > 0.25 * (kept - length):
            chosen.append(g)
            kept -= length
    return sorted(chosen)


def _scale(start: float, end: float, breaks: list[list[float]]) -> Any:
    shown = max(end - start - sum(b - a for a, b in breaks), 1e-9)
    share = 1.0 - BREAK_SHARE * len(breaks)

    def x(t: float) -> float:
        t = min(max(t, start), end)
        plain = t - start
        out = 0.0
        for a, b in breaks:
            if t <= a:
                break
            plain -= min(t, b) - a
            out += BREAK_SHARE * (min(t, b) - a) / (b - a)
        return round(out + share * plain / shown, 5)

    return x


def layout(record: Record, events: list[Event], children: list[Record], now: float) -> Timeline:
    """The timeline of one execution (times as epoch seconds; x0/x1 as shares of the axis)."""
    ss = spans(record.admitted_at, events)
    start = record.admitted_at
    end = max(events[-1].at if events else start, start)
    if not record.terminal:
        end = max(end, now)
    rows: list[Row] = []
    backoffs = {(s.key, s.n): s for s in ss if s.kind == "backoff"}
    retried = {s.key for s in ss if s.kind == "attempt" and s.n > 1}
    by_step = {c.parent.step_key if c.parent else None: c for c in children}
    for s in ss:
        if s.kind == "backoff":
            continue
        bars = [_bar(s, end)]
        if s.kind == "delivery":
            rows.append(Row("delivery", f"delivery {s.n}", tuple(bars)))
            continue
        label = f"{s.key} #{s.n}" if s.key in retried else s.key
        if (s.key, s.n) in backoffs:
            bars.append(_bar(backoffs[(s.key, s.n)], end))
        child = by_step.get(s.key) if s.step_kind == "call" else None
        link = child.execution_id if child is not None else None
        rows.append(Row("step", label, tuple(bars), s.step_kind, link))
    for c in children:
        stop = c.updated_at if c.terminal else max(now, c.updated_at)
        bar = Bar(
            kind="run",
            outcome=c.status if c.terminal else "running",
            start=c.admitted_at,
            end=max(stop, c.admitted_at),
            open=not c.terminal,
            error=outcome_error_text(c.outcome),
            wake_at=None,
        )
        rows.append(Row("child", c.execution_id, (bar,), link=c.execution_id))
        end = max(end, bar.end)
    rows.sort(key=lambda r: (r.bars[0].start, r.kind != "delivery"))
    active = [(b.start, b.end) for r in rows if r.kind in ("delivery", "child") for b in r.bars]
    breaks = _breaks(active, start, end)
    x = _scale(start, end, breaks)
    placed = [
        dataclasses.replace(
            r, bars=tuple(dataclasses.replace(b, x0=x(b.start), x1=x(b.end)) for b in r.bars)
        )
        for r in rows[:MAX_ROWS]
    ]
    return Timeline(
        execution_id=record.execution_id,
        status=record.status,
        start=start,
        end=end,
        now=now,
        breaks=tuple(Break(a, b, x(a), x(b)) for a, b in breaks),
        rows=tuple(placed),
        rows_left=max(0, len(rows) - MAX_ROWS),
    )


def read(store: Any, execution_id: str, now: float) -> TimelineJson:
    """An execution's timeline as the API gives it (`GET /v1/executions/{id}/timeline`).
    EXECUTION_NOT_FOUND for an unknown ID."""
    desc = store.describe(execution_id)
    return as_json(layout(desc.record, store.events(execution_id), list(desc.children), now))


def as_json(t: Timeline) -> TimelineJson:
    """`layout`'s answer with its times in ISO 8601 and each stretch's length in seconds."""
    from ys.daemon.views import iso

    def gap(b: Break) -> BreakJson:
        seconds = round(b.end - b.start, 3)
        return {
            "start": iso(b.start),
            "end": iso(b.end),
            "x0": b.x0,
            "x1": b.x1,
            "seconds": seconds,
        }

    def bar(b: Bar) -> BarJson:
        return {
            "kind": b.kind,
            "outcome": b.outcome,
            "start": iso(b.start),
            "end": iso(b.end),
            "open": b.open,
            "error": b.error,
            "wake_at": iso(b.wake_at),
            "x0": b.x0,
            "x1": b.x1,
            "seconds": round(b.end - b.start, 3),
        }

    def row(r: Row) -> RowJson:
        out: RowJson = {"kind": r.kind, "label": r.label, "bars": [bar(b) for b in r.bars]}
        if r.kind == "step":
            out["step_kind"] = r.step_kind
        if r.link is not None:
            out["link"] = r.link
        return out

    return {
        "execution_id": t.execution_id,
        "status": t.status,
        "start": iso(t.start),
        "end": iso(t.end),
        "now": iso(t.now),
        "breaks": [gap(b) for b in t.breaks],
        "rows": [row(r) for r in t.rows],
        "rows_left": t.rows_left,
    }
