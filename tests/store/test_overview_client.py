"""The store's reads for the dashboard (`OverviewClient`) and its account of schedule slots,
per adapter, with an explicit clock."""

from __future__ import annotations

import pytest

from tests.store.conftest import StoreFactory
from tests.support import T0
from ys.outcomes import outcome_of
from ys.store.base import SLOTS_KEPT
from ys.store.protocols import HourDurations, Store

HOUR = 3600.0


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    return store_factory(clock=lambda: T0)


def _ids(page: object) -> list[str]:
    return [r.execution_id for r in page.items]  # type: ignore[attr-defined]


@pytest.mark.parametrize("many", [False, True])
def test_find_by_id_prefix_pages_newest_first(
    store_factory: StoreFactory, store: Store, many: bool
):
    n = store_factory.adapter.many_ids if many else 30
    for i in range(n):
        store.admit("wf", execution_id=f"a/{i:05d}", now=T0 + i)
    store.admit("wf", execution_id="b/1", now=T0 + n)
    first = store.find(id_prefix="a/", limit=5)
    assert _ids(first) == [f"a/{i:05d}" for i in range(n - 1, n - 6, -1)]
    second = store.find(id_prefix="a/", limit=5, page_token=first.next_page_token)
    assert _ids(second) == [f"a/{i:05d}" for i in range(n - 6, n - 11, -1)]
    assert _ids(store.find(id_prefix="a/0000", limit=20)) == [
        f"a/{i:05d}" for i in range(9, -1, -1)
    ]
    assert _ids(store.find(id_prefix="b/")) == ["b/1"]
    assert _ids(store.find(id_prefix="c")) == []


def test_find_since_and_status(store: Store):
    for i in range(5):
        store.admit("wf", execution_id=f"x{i}", now=T0 + i * HOUR)
    assert _ids(store.find(since=T0 + 3 * HOUR)) == ["x4", "x3"]
    (d,) = store.claim_due(now=T0 + 5 * HOUR, limit=1)
    assert _ids(store.find(statuses=["running"])) == [d.execution_id]


def test_running_due_and_recent_failures(store: Store):
    for i in range(3):
        store.admit("wf", execution_id=f"r{i}", now=T0 + i)
    first, second = store.claim_due(now=T0 + 10, limit=2, lease_seconds=30)
    running = {r.record.execution_id: r for r in store.running()}
    assert set(running) == {first.execution_id, second.execution_id}
    assert running[first.execution_id].claimed_at == T0 + 10
    assert running[first.execution_id].lease_expires_at == T0 + 40
    assert [r.execution_id for r in store.due()] == ["r2"]
    store.acknowledge(
        first.execution_id,
        first.token,
        outcome_of({"status": "failed", "error": {"name": "E", "message": "m"}}),
        now=T0 + 20,
    )
    assert [r.execution_id for r in store.failed_since(T0)] == [first.execution_id]
    assert store.failed_since(T0 + 21) == []
    assert store.count_status("running") == 1 and store.count_status("admitted") == 1


def test_slots_fired_on_time_are_recorded_without_a_reason(store: Store):
    store.schedule_add("hourly", "wf", "0 * * * *", tz="UTC", now=T0)
    slot = store.schedule("hourly").next_fire_at
    store.schedule_tick("hourly", now=slot + 1)
    (s,) = store.schedule_slots("hourly")
    assert (s.outcome, s.why, s.execution_id) == ("fired", None, f"hourly@{_utc(slot)}")


def test_slots_missed_while_asleep_say_why(store: Store):
    store.schedule_add("once", "wf", "0 * * * *", tz="UTC", catch_up="once", now=T0)
    store.schedule_add("none", "wf", "0 * * * *", tz="UTC", catch_up="skip", now=T0)
    first = store.schedule("once").next_fire_at
    later = first + 4 * HOUR + 600  # five slots passed, the last one ten minutes ago
    store.schedule_tick("once", now=later)
    store.schedule_tick("none", now=later)
    late, missed = store.schedule_slots("once")
    assert late.outcome == "late" and late.slot == first + 4 * HOUR
    assert "10m late" in late.why and "catch-up once" in late.why
    assert missed.outcome == "missed" and missed.count == 4
    assert "fires only the latest" in missed.why
    (skipped,) = store.schedule_slots("none")
    assert skipped.outcome == "missed" and skipped.count == 5
    assert "catch-up skip fires none" in skipped.why
    recent = store.schedule_slots(since=later, outcomes=("late", "skipped", "missed"))
    assert len(recent) == 3


def test_a_slot_skipped_behind_a_running_execution_says_which(store: Store):
    store.schedule_add("often", "wf", "*/5 * * * *", tz="UTC", overlap="skip", now=T0)
    slot = store.schedule("often").next_fire_at
    store.schedule_tick("often", now=slot + 1)
    store.claim_due(now=slot + 2, limit=1)
    store.schedule_tick("often", now=slot + 301)
    skipped, fired = store.schedule_slots("often")
    assert fired.outcome == "fired"
    assert skipped.outcome == "skipped" and fired.execution_id in skipped.why
    assert "overlap skip" in skipped.why


def test_each_schedule_keeps_its_newest_slots(store: Store):
    store.schedule_add("minutely", "wf", "* * * * *", tz="UTC", overlap="allow", now=T0)
    slot = store.schedule("minutely").next_fire_at
    for i in range(SLOTS_KEPT + 5):
        store.schedule_tick("minutely", now=slot + 60 * i + 1)
    kept = store.schedule_slots("minutely", limit=1000)
    assert len(kept) == SLOTS_KEPT and kept[0].slot == slot + 60 * (SLOTS_KEPT + 4)


def _utc(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the pictures' reads (ys/store/sql/charts.py) ----------------------------------------------


def _fail(store: Store, execution_id: str, now: float) -> None:
    (d,) = store.claim_due(now=now, limit=1)
    assert d.execution_id == execution_id
    store.acknowledge(
        d.execution_id, d.token, outcome_of({"status": "failed", "error": {"name": "E"}}), now=now
    )


def _complete(store: Store, execution_id: str, now: float) -> None:
    (d,) = store.claim_due(now=now, limit=1)
    assert d.execution_id == execution_id
    store.acknowledge(
        d.execution_id, d.token, outcome_of({"status": "completed", "result": 1}), now=now
    )


B = T0 - T0 % 3600 + 3600  # a whole hour after T0: the charts read whole minutes and hours


def test_activity_counts_started_completed_and_failed_per_bucket(store: Store):
    store.admit("a", execution_id="a1", now=B + 10)
    _complete(store, "a1", B + 20)
    store.admit("a", execution_id="a2", now=B + 610)
    _fail(store, "a2", B + 1250)
    store.admit("b", execution_id="b1", now=B + 620)
    _complete(store, "b1", B + 630)
    store.admit("b", execution_id="b2", now=B + 1300)  # still admitted
    store.admit("b", execution_id="old", now=B - 5)  # before the first bucket
    buckets = store.activity(B, B + 1800, 600)
    assert [b.start for b in buckets] == [B, B + 600, B + 1200]
    assert [(b.started, b.completed, b.failed) for b in buckets] == [
        (1, 1, 0),
        (2, 1, 0),
        (1, 0, 1),
    ]
    of_b = store.activity(B, B + 1800, 600, workflow="b")
    assert [(b.started, b.completed, b.failed) for b in of_b] == [
        (0, 0, 0),
        (1, 1, 0),
        (1, 0, 0),
    ]
    assert [b.failed for b in store.activity(B, B + 1800, 600, workflow="a")] == [0, 0, 1]
    each = store.activity_by_workflow(B, B + 1800, 600)
    assert set(each) == {"a", "b"} and each["b"] == of_b
    assert [b.started for b in store.activity(B - 60, B + 60, 60)] == [1, 1]
    with pytest.raises(ValueError):
        store.activity(B, B + 86400, 60)  # more than 1000 buckets
    with pytest.raises(ValueError):
        store.activity(B + 1, B + 601, 600)  # not whole minutes
    with pytest.raises(ValueError):
        store.activity(B, B + 600, 60, workflow="a")  # a workflow's: whole 10 minutes


def test_activity_is_a_rollup_that_outlives_the_executions_gc_prunes(store: Store):
    store.admit("a", execution_id="a1", now=B + 10)
    _fail(store, "a1", B + 70)
    store.gc(60, now=B + 200)  # the execution is pruned; its minute's counts stay
    assert store.get("a1") is None
    assert [(b.started, b.failed) for b in store.activity(B, B + 120, 60)] == [
        (1, 0),
        (0, 1),
    ]
    assert store.activity(B, B + 600, 600, workflow="a")[0].failed == 1
    store.gc(60, now=B + 3 * 86400)  # the rollups keep two days, then go too
    assert sum(b.started for b in store.activity(B, B + 120, 60)) == 0
    assert store.activity_by_workflow(B, B + 600, 600) == {}


def test_delivery_durations_per_hour_with_p50_and_p95(store: Store):
    for i in range(20):  # 19 deliveries of 2 s and one of 60 s, ending in the first hour
        store.admit("d", execution_id=f"d{i}", now=B)
        (d,) = store.claim_due(now=B + 100 * i, limit=1, lease_seconds=120)
        took = 60.0 if i == 19 else 2.0
        done = {"status": "completed", "result": 1}
        store.acknowledge(d.execution_id, d.token, outcome_of(done), now=B + 100 * i + took)
    store.admit("d", execution_id="r", now=B + HOUR)  # a delivery released for a retry
    (d,) = store.claim_due(now=B + HOUR + 10, limit=1)
    store.release(d.execution_id, d.token, retry_at=B + 2 * HOUR, now=B + HOUR + 10.5)
    store.admit("d", execution_id="never", now=B + HOUR)  # cancelled before any delivery
    store.cancel("never", now=B + HOUR + 20, at_once=True)
    first, second, third = store.delivery_durations(B, B + 3 * HOUR)
    assert [h.start for h in (first, second, third)] == [B, B + HOUR, B + 2 * HOUR]
    assert first.count == 20
    assert first.p50 == pytest.approx(2.0, rel=0.09)
    assert first.p95 == pytest.approx(2.0, rel=0.09)  # the 19th of 20 took 2 s
    assert second.count == 1 and second.p50 == pytest.approx(0.5, rel=0.09)
    assert third == HourDurations(B + 2 * HOUR, count=0, p50=None, p95=None)
    assert store.delivery_durations(B, B + HOUR)[0].p95 < 3
    with pytest.raises(ValueError):
        store.delivery_durations(B + 1, B + HOUR)


def test_schedule_history_marks_failed_fires_and_lateness(store: Store):
    store.schedule_add("hourly", "wf", "0 * * * *", tz="UTC", catch_up="once", now=T0)
    first = store.schedule("hourly").next_fire_at
    store.schedule_tick("hourly", now=first + 5)  # on time
    (fired,) = store.schedule_slots("hourly")
    _fail(store, fired.execution_id, first + 10)
    store.schedule_tick("hourly", now=first + 3 * HOUR + 600)  # late, two missed
    hist = store.schedule_history("hourly")
    assert [h.mark for h in hist] == ["late", "missed", "failed"]
    late, missed, failed = hist
    assert late.slot == first + 3 * HOUR and late.lateness == pytest.approx(600)
    assert late.status == "admitted"
    assert missed.count == 2 and missed.lateness is None
    assert failed.outcome == "fired" and failed.status == "failed"
    assert failed.lateness == pytest.approx(5)
    assert len(store.schedule_history("hourly", limit=1)) == 1
    assert store.schedule_history("nothing") == []
