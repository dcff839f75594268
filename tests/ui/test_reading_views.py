"""The JSON the dashboard and `GET /v1/overview` show of the rows the store reads for people
(ys/store/reading.py), built at the edge by ys/daemon/views.py: the wire shapes, times in
ISO 8601."""

from __future__ import annotations

from ys.daemon import views
from ys.store.protocols import (
    ActivityBucket,
    ConcurrencyWait,
    DatabaseInfo,
    EffectWait,
    Event,
    HistoryEvent,
    HourDurations,
    PastDelivery,
    ReleasedData,
    SlotHistory,
    SlotOutcome,
    StepData,
    StoreWait,
    StreamEvent,
    ValueWaiter,
)

T = 1_700_000_000.0
AT = "2023-11-14T22:13:20.000Z"


def test_schedule_slots_and_history_show_their_times_in_iso():
    assert views.slot(SlotOutcome("hourly", T, "late", "10m late", "hourly@x", T, 1)) == {
        "name": "hourly",
        "slot": AT,
        "outcome": "late",
        "why": "10m late",
        "execution_id": "hourly@x",
        "at": AT,
        "count": 1,
    }
    h = SlotHistory(T, "fired", "failed", None, "hourly@x", "failed", T, 1, 5.0)
    assert views.slot_history(h) == {
        "slot": AT,
        "outcome": "fired",
        "mark": "failed",
        "why": None,
        "execution_id": "hourly@x",
        "status": "failed",
        "at": AT,
        "count": 1,
        "lateness": 5.0,
    }


def test_chart_buckets_show_their_start_in_iso():
    assert views.bucket(ActivityBucket(T, 3, 2, 1)) == {
        "start": AT,
        "started": 3,
        "completed": 2,
        "failed": 1,
    }
    assert views.hour(HourDurations(T, 0, None, None)) == {
        "start": AT,
        "count": 0,
        "p50": None,
        "p95": None,
    }


def test_each_kind_of_wait_shows_its_own_fields():
    assert views.wait(StoreWait("approve/1", "ask", T)) == {
        "kind": "store",
        "key": "approve/1",
        "step_key": "ask",
        "since": AT,
    }
    assert views.wait(EffectWait("charge-1", "pay", T)) == {
        "kind": "effect",
        "effect_id": "charge-1",
        "step_key": "pay",
        "wake_at": AT,
    }
    assert views.wait(ConcurrencyWait("limited", "*")) == {
        "kind": "concurrency",
        "workflow": "limited",
        "slot": "*",
    }


def test_value_waiters_and_the_database():
    assert views.value_waiter(ValueWaiter("approve/1", "x1", "ask", 2, T)) == {
        "key": "approve/1",
        "execution_id": "x1",
        "step_key": "ask",
        "seen_version": 2,
        "since": AT,
    }
    assert views.database(DatabaseInfo("/tmp/ys.db", 4096, 9)) == {
        "path": "/tmp/ys.db",
        "bytes": 4096,
        "schema_version": 9,
    }


def test_a_past_delivery_shows_detail_and_warnings_only_where_there_are_any():
    running = PastDelivery(1, T, script_sha256="ab")
    assert views.past_delivery(running) == {
        "attempt": 1,
        "started_at": AT,
        "ended_at": None,
        "outcome": None,
        "script_sha256": "ab",
    }
    released = PastDelivery(2, T, T, "retry (worker_failed)", None, "exit 1", ("key changes",))
    assert views.past_delivery(released) == {
        "attempt": 2,
        "started_at": AT,
        "ended_at": AT,
        "outcome": "retry (worker_failed)",
        "script_sha256": None,
        "detail": "exit 1",
        "warnings": ["key changes"],
    }


def test_a_stream_event_shows_the_history_shape_with_its_execution_and_cursor():
    from ys.daemon.api_events import event

    e = StreamEvent(41, "x1", "wf", 3, Event("released", T, ReleasedData("crash", T)))
    assert event(e) == {
        "execution_id": "x1",
        "workflow": "wf",
        "seq": 3,
        "at": AT,
        "kind": "released",
        "data": {"reason": "crash", "retry_at": AT},
        "cursor": "41",
    }


def test_a_history_event_shows_its_times_in_iso():
    e = HistoryEvent(2, Event("step", T, StepData("nap", status="waiting", wake_at=T)))
    assert views.event(e) == {
        "seq": 2,
        "at": AT,
        "kind": "step",
        "data": {"key": "nap", "wake_at": AT, "status": "waiting"},
    }
