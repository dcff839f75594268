"""The timeline derived from a history (ys/daemon/timeline.py): pure, no daemon."""

from __future__ import annotations

from typing import Any

from ys.daemon import timeline
from ys.store.eventdata import event_data_of
from ys.store.records import Event, Record, fold

T = 1_000_000.0


def ev(at: float, what: str, **data: Any) -> Event:
    return Event(what, T + at, event_data_of(what, data))


def admitted(xid: str = "x/1") -> Event:
    return ev(0, "admitted", execution_id=xid, workflow="flaky", params={}, context={})


# a run step retried twice, a sleep of an hour, a child called, then done
HISTORY = [
    admitted(),
    ev(0.2, "claimed", attempt=1),
    ev(0.25, "step", key="load", kind="run", status="waiting", wake_at=T + 0.55,
       error={"name": "RuntimeError", "message": "flaky 0"}),
    ev(0.25, "suspended"),
    ev(0.6, "claimed", attempt=2),
    ev(0.7, "step", key="load", kind="run", status="completed", attempts=2),
    ev(0.8, "step", key="nap", kind="sleep", status="waiting", wake_at=T + 3600.8),
    ev(0.8, "suspended"),
    ev(3601.0, "claimed", attempt=3),
    ev(3601.1, "step", key="nap", kind="sleep", status="completed", wake_at=T + 3600.8),
    ev(3601.2, "step", key="kid", kind="call", status="waiting"),
    ev(3601.2, "suspended"),
    ev(3602.0, "claimed", attempt=4),
    ev(3602.1, "step", key="kid", kind="call", status="completed"),
    ev(3602.2, "failed", error={"name": "ValueError", "message": "bad"}),
]  # fmt: skip


def child() -> Record:
    r = fold(
        [
            ev(
                3601.2,
                "admitted",
                execution_id="kid-1",
                workflow="child",
                params={},
                context={},
                parent={"execution_id": "x/1", "step_key": "kid"},
            ),
            ev(3601.3, "claimed", attempt=1),
            ev(3601.9, "completed", result=2),
        ]
    )
    return r


def test_spans_name_each_delivery_attempt_backoff_and_wait():
    ss = timeline.spans(T, HISTORY)
    kinds = [(s.kind, s.key, s.n, s.status) for s in ss]
    assert ("attempt", "load", 1, "failed") in kinds
    assert ("backoff", "load", 1, "waiting") in kinds
    assert ("attempt", "load", 2, "completed") in kinds
    assert ("wait", "nap", 1, "completed") in kinds
    assert ("wait", "kid", 1, "completed") in kinds
    assert [s.n for s in ss if s.kind == "delivery"] == [1, 2, 3, 4]
    first = next(s for s in ss if s.kind == "attempt" and s.n == 1)
    assert first.error == "RuntimeError: flaky 0" and first.delivery == 1
    # what its step event said: a failed attempt waits for its retry
    assert (first.step_status, first.step_error) == ("waiting", "RuntimeError: flaky 0")
    assert first.wake_at == T + 0.55
    backoff = next(s for s in ss if s.kind == "backoff")
    assert (backoff.start, backoff.end) == (T + 0.25, T + 0.55)
    nap = next(s for s in ss if s.key == "nap")
    assert (nap.start, nap.end, nap.delivery) == (T + 0.7, T + 3601.1, 0)  # crossed deliveries
    last = [s for s in ss if s.kind == "delivery"][-1]
    assert last.status == "failed" and last.error == "ValueError: bad"


def test_spans_of_a_live_execution_stay_open():
    ss = timeline.spans(T, HISTORY[:8])  # suspended in its nap
    nap = next(s for s in ss if s.key == "nap")
    assert nap.end is None and nap.status == "waiting" and nap.step_kind == "sleep"
    ss = timeline.spans(T, HISTORY[:2])  # its first delivery runs
    assert [(s.kind, s.end) for s in ss] == [("delivery", None)]


def test_layout_rows_compress_the_long_sleep_and_link_the_child():
    record = fold(HISTORY)
    t = timeline.layout(record, HISTORY, [child()], now=T + 9999)
    labels = [r.label for r in t.rows]
    assert labels[:3] == ["delivery 1", "load #1", "delivery 2"]
    assert {"load #2", "nap", "kid", "kid-1"} <= set(labels)
    load1 = next(r for r in t.rows if r.label == "load #1")
    assert [b.kind for b in load1.bars] == ["run", "backoff"]
    assert load1.bars[0].outcome == "failed"
    kid = next(r for r in t.rows if r.label == "kid")
    assert kid.link == "kid-1" and kid.bars[0].kind == "wait"
    assert next(r for r in t.rows if r.label == "kid-1").kind == "child"
    # the hour of sleep is one marked break, and the rest keeps most of the axis
    assert len(t.breaks) == 1
    br = t.breaks[0]
    assert br.start <= T + 0.8 and br.end >= T + 3600.8
    assert abs(br.x1 - br.x0 - timeline.BREAK_SHARE) < 1e-4
    d1 = next(r for r in t.rows if r.label == "delivery 1").bars[0]
    assert d1.x1 - d1.x0 > 0.01  # 50 ms of an hour would be a hairline without it
    xs = [getattr(b, k) for r in t.rows for b in r.bars for k in ("x0", "x1")]
    assert min(xs) >= 0 and max(xs) <= 1
    assert t.end == T + 3602.2  # a terminal execution ends at its last event


def test_layout_of_a_short_execution_has_no_break():
    h = [admitted(), ev(0.1, "claimed", attempt=1), ev(0.5, "step", key="a", kind="run",
         status="completed"), ev(0.6, "completed", result=1)]  # fmt: skip
    t = timeline.layout(fold(h), h, [], now=T + 50)
    assert t.breaks == () and [r.label for r in t.rows] == ["delivery 1", "a"]
    a = t.rows[1].bars[0]
    assert (a.x0, a.x1) == (round(0.1 / 0.6, 5), round(0.5 / 0.6, 5))
