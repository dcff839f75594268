"""The schedule client, per adapter, with the clock injected: fires are executions named after
their slot, overlap policies (also with a run that outlasts two slots), pause and resume,
catch-up after a sleep."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.store.conftest import StoreFactory
from ys.contract import slot_id
from ys.errors import InvalidArgument, YsError
from ys.outcomes import outcome_of
from ys.store.protocols import ScheduleAction

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC).timestamp()  # a whole hour


@pytest.fixture
def store(store_factory: StoreFactory):
    return store_factory(lease_seconds=3600)


def add(store, name="hourly", overlap="skip", catch_up="once", **kw):
    return store.schedule_add(
        name,
        "job",
        "0 * * * *",
        tz="UTC",
        overlap=overlap,
        catch_up=catch_up,
        now=T0 - 1,
        params={"p": 1},
        **kw,
    )


def finish(store, execution_id, now):
    """Run an execution to completion as a worker would."""
    for d in store.claim_due(now=now, limit=100):
        if d.execution_id == execution_id:
            store.acknowledge(
                d.execution_id, d.token, outcome_of({"status": "completed", "result": 1}), now=now
            )
        else:
            store.release(d.execution_id, d.token, retry_at=now, now=now)


def fired(actions):
    return [a.execution_id for a in actions if a.action == "fired"]


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
    assert s.last_fire_at == T0 + 5 and s.next_fire_at == T0 + 3600


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
    assert [a.action for a in actions] == ["skipped"]
    finish(store, first, T0 + 3600 + 10)
    assert fired(store.schedule_tick("hourly", now=T0 + 7200 + 5)) == [slot_id("hourly", T0 + 7200)]


def test_overlap_queue_keeps_at_most_one_waiting_fire(store):
    add(store, overlap="queue")
    first = fired(store.schedule_tick("hourly", now=T0 + 5))[0]
    assert [a.action for a in store.schedule_tick("hourly", now=T0 + 3605)] == ["queued"]
    assert [a.action for a in store.schedule_tick("hourly", now=T0 + 7205)] == ["queued"]
    assert store.schedule("hourly").queued_slot == T0 + 7200  # the newest wins; one only
    finish(store, first, T0 + 7210)
    actions = store.schedule_tick("hourly", now=T0 + 7215)
    assert fired(actions) == [slot_id("hourly", T0 + 7200)]
    assert store.schedule("hourly").queued_slot is None
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
    assert ScheduleAction("caught_up", policy="all", fired=8) in actions
    contexts = [json.loads(store.get(i).context_json)["catch_up"] for i in ids]
    assert contexts == [True] * 8 + [False]
    assert store.schedule_tick("hourly", now=T0 + 8 * 3600 + 40) == []


def test_pause_stops_fires_and_resume_does_not_replay_the_paused_time(store):
    add(store)
    store.schedule_pause("hourly", True, now=T0)
    assert store.schedule_tick("hourly", now=T0 + 5) == []
    s = store.schedule_pause("hourly", False, now=T0 + 3 * 3600 + 60)
    assert s.next_fire_at == T0 + 4 * 3600
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


# -- a run that outlasts two slots ----------------------------------------------------------

OVERLAP_T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC).timestamp()
HOUR = 3600.0
TERMINAL = {"completed", "failed", "cancelled"}
# policy -> slots (hours after OVERLAP_T0) that get an execution while hour 0's run lasts 2 h
FIRED = {"skip": [0], "queue": [0, 2], "allow": [0, 1, 2]}


@pytest.mark.parametrize("policy", ["skip", "queue", "allow"])
def test_a_run_that_outlasts_two_slots(store_factory: StoreFactory, policy: str) -> None:
    """Hours pass in microseconds: a run of hour 0 lasts two hours."""
    T0 = OVERLAP_T0  # the module's T0 is another day's
    store = store_factory(lease_seconds=10 * HOUR)
    store.schedule_add("hourly", "job", "0 * * * *", tz="UTC", overlap=policy, now=T0 - 1)

    def tick(at: float) -> list[str]:
        return [a.action for a in store.schedule_tick("hourly", now=at)]

    def running() -> list[str]:
        return [
            r.execution_id for r in store.list(workflow="job").items if r.status not in TERMINAL
        ]

    assert tick(T0 + 1) == ["fired"]
    [long_run] = store.claim_due(now=T0 + 2, limit=10)  # the delivery starts: running
    assert store.get(long_run.execution_id).status == "running"
    expect = {"skip": ["skipped"], "queue": ["queued"], "allow": ["fired"]}[policy]
    assert tick(T0 + HOUR + 1) == expect
    assert tick(T0 + 2 * HOUR + 1) == expect
    if policy != "allow":
        assert running() == [long_run.execution_id]  # never two at once
    # the queue holds one fire, the newest; it waits while the long run goes on
    assert (store.schedule("hourly").queued_slot is not None) == (policy == "queue")
    assert tick(T0 + 2 * HOUR + 30) == []
    store.acknowledge(
        long_run.execution_id,
        long_run.token,
        outcome_of({"status": "completed", "result": None}),
        now=T0 + 2 * HOUR + 40,
    )
    after = tick(T0 + 2 * HOUR + 50)
    assert after == (["fired"] if policy == "queue" else [])
    ids = sorted(r.execution_id for r in store.list(workflow="job").items)
    assert ids == sorted(slot_id("hourly", T0 + h * HOUR) for h in FIRED[policy])
    assert store.schedule("hourly").queued_slot is None


# -- a schedule stored before its expression was refused ---------------------------------


def test_a_six_field_schedule_stored_before_the_check_stops_being_due(
    store_factory: StoreFactory,
) -> None:
    """A row written before six fields were refused: its tick says why once and leaves it
    with no next fire, instead of failing at every tick; resuming it says what to do."""
    t0 = dt.datetime(2026, 6, 2, 3, 0, tzinfo=dt.UTC).timestamp()
    store = store_factory()
    store.schedule_add("old", "job", "0 3 * * *", tz="UTC", now=t0 - 86400)
    store_factory.adapter.update_rows(
        store_factory.location, "schedules", {"name": "old"}, cron="0 3 * * * *"
    )
    actions = store.schedule_tick("old", now=t0 + 1)
    assert [a.action for a in actions] == ["refused"]
    assert "6 fields" in actions[0].why
    assert store.schedule("old").next_fire_at is None
    assert store.list(workflow="job").items == []
    store.schedule_pause("old", True, now=t0 + 2)
    with pytest.raises(InvalidArgument, match="add it again"):
        store.schedule_pause("old", False, now=t0 + 3)
