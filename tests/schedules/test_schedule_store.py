"""Schedules in the store, with the clock injected: fires are executions named after their
slot, overlap policies, pause and resume, catch-up after a sleep."""

from __future__ import annotations

import datetime as dt

import pytest

from ys.errors import YsError
from ys.store.schedules import slot_id
from ys.store.sqlite import SqliteStore

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC).timestamp()  # a whole hour


@pytest.fixture
def store(tmp_path):
    s = SqliteStore(tmp_path / "ys.db", lease_seconds=3600)
    yield s
    s.close()


def add(store, name="hourly", overlap="skip", catch_up="once", **kw):
    return store.schedule_add(name, "job", "0 * * * *", tz="UTC", overlap=overlap,
                              catch_up=catch_up, now=T0 - 1, params={"p": 1}, **kw)


def finish(store, execution_id, now):
    """Run an execution to completion as a worker would."""
    for d in store.claim_due(now=now, limit=100):
        if d.execution_id == execution_id:
            store.acknowledge(d.execution_id, d.token, {"status": "completed", "result": 1},
                              now=now)
        else:
            store.release(d.execution_id, d.token, retry_at=now, now=now)


def fired(actions):
    return [a["execution_id"] for a in actions if a["action"] == "fired"]


def test_a_fire_admits_an_execution_named_after_the_schedule_and_slot(store):
    add(store)
    assert store.schedule_tick("hourly", now=T0 - 10) == []
    actions = store.schedule_tick("hourly", now=T0 + 5)
    assert fired(actions) == ["hourly@2026-06-01T12:00:00Z"]
    rec = store.get("hourly@2026-06-01T12:00:00Z")
    assert rec.workflow == "job" and rec.status == "admitted"
    import json

    ctx = json.loads(rec.context_json)
    assert ctx == {"catch_up": False, "schedule": "hourly", "slot": "2026-06-01T12:00:00Z"}
    assert json.loads(rec.params_json) == {"p": 1}
    s = store.schedule("hourly")
    assert s["last_fire_at"] == T0 + 5 and s["next_fire_at"] == T0 + 3600


def test_a_repeated_tick_for_the_same_slot_never_makes_a_second_execution(store):
    add(store, overlap="allow")
    store.schedule_tick("hourly", now=T0 + 5)
    assert store.schedule_tick("hourly", now=T0 + 6) == []
    # even if the cursor were lost (a crash between admission and cursor is impossible, since
    # both are one transaction), the slot's ID is taken and admission is skipped
    assert len(store.list(workflow="job").items) == 1


def test_overlap_skip_does_not_fire_while_the_previous_run_is_going(store):
    add(store, overlap="skip")
    first = fired(store.schedule_tick("hourly", now=T0 + 5))[0]
    actions = store.schedule_tick("hourly", now=T0 + 3600 + 5)
    assert [a["action"] for a in actions] == ["skipped"]
    finish(store, first, T0 + 3600 + 10)
    assert fired(store.schedule_tick("hourly", now=T0 + 7200 + 5)) == [
        slot_id("hourly", T0 + 7200)]


def test_overlap_queue_keeps_at_most_one_waiting_fire(store):
    add(store, overlap="queue")
    first = fired(store.schedule_tick("hourly", now=T0 + 5))[0]
    assert [a["action"] for a in store.schedule_tick("hourly", now=T0 + 3605)] == ["queued"]
    assert [a["action"] for a in store.schedule_tick("hourly", now=T0 + 7205)] == ["queued"]
    assert store.schedule("hourly")["queued_slot"] == T0 + 7200  # the newest wins; one only
    finish(store, first, T0 + 7210)
    actions = store.schedule_tick("hourly", now=T0 + 7215)
    assert fired(actions) == [slot_id("hourly", T0 + 7200)]
    assert store.schedule("hourly")["queued_slot"] is None
    assert len(store.list(workflow="job").items) == 2


def test_overlap_allow_fires_anyway(store):
    add(store, overlap="allow")
    store.schedule_tick("hourly", now=T0 + 5)
    store.schedule_tick("hourly", now=T0 + 3605)
    assert len(store.list(workflow="job", statuses=["admitted"]).items) == 2


def test_catch_up_after_a_sleep_is_applied_once_and_marked_in_the_context(store):
    import json

    add(store, catch_up="all", overlap="allow")
    actions = store.schedule_tick("hourly", now=T0 + 8 * 3600 + 30)  # slept 8 hours
    ids = fired(actions)
    assert len(ids) == 9  # 12:00 .. 20:00; 20:00 on time
    assert {"action": "caught_up", "policy": "all", "fired": 8} in actions
    contexts = [json.loads(store.get(i).context_json)["catch_up"] for i in ids]
    assert contexts == [True] * 8 + [False]
    assert store.schedule_tick("hourly", now=T0 + 8 * 3600 + 40) == []


def test_pause_stops_fires_and_resume_does_not_replay_the_paused_time(store):
    add(store)
    store.schedule_pause("hourly", True, now=T0)
    assert store.schedule_tick("hourly", now=T0 + 5) == []
    s = store.schedule_pause("hourly", False, now=T0 + 3 * 3600 + 60)
    assert s["next_fire_at"] == T0 + 4 * 3600
    assert store.schedule_tick("hourly", now=T0 + 3 * 3600 + 70) == []


def test_bad_schedules_are_refused_with_nothing_stored(store):
    with pytest.raises(YsError) as e:
        store.schedule_add("x", "job", "61 * * * *", tz="UTC")
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(YsError):
        store.schedule_add("x", "job", "0 * * * *", tz="Nowhere/Land")
    with pytest.raises(YsError):
        store.schedule_add("x@y", "job", "0 * * * *", tz="UTC")
    with pytest.raises(YsError):
        store.schedule_add("x", "job", "0 * * * *", tz="UTC", catch_up="sometimes")
    assert store.schedules() == []


def test_adding_a_schedule_twice_is_a_conflict(store):
    add(store)
    with pytest.raises(YsError) as e:
        add(store)
    assert e.value.code == "FAILED_PRECONDITION"
    store.schedule_remove("hourly")
    assert store.schedules() == []
