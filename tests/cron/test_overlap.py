"""Overlap policies with a long-running execution: skip, queue and allow, first in the store
with the clock injected (hours pass in microseconds), then end to end with a real daemon whose
schedule has three slots due at once and a workflow that blocks until the test releases it."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from cron_support import executions_of, minute_slots, put_schedule, wait_status, wait_until

from ys.store.schedules import slot_id
from ys.store.sqlite import SqliteStore

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC).timestamp()
HOUR = 3600.0
TERMINAL = {"completed", "failed", "cancelled"}

# policy -> slots (hours after T0) that get an execution while hour 0's run lasts 2 hours
FIRED = {"skip": [0], "queue": [0, 2], "allow": [0, 1, 2]}


@pytest.mark.parametrize("policy", ["skip", "queue", "allow"])
def test_a_run_that_outlasts_two_slots(tmp_path, policy):
    store = SqliteStore(tmp_path / "ys.db", lease_seconds=10 * HOUR)
    try:
        store.schedule_add("hourly", "job", "0 * * * *", tz="UTC", overlap=policy, now=T0 - 1)

        def tick(at: float) -> list[str]:
            return [a["action"] for a in store.schedule_tick("hourly", now=at)]

        def running() -> list[str]:
            return [r.execution_id for r in store.list(workflow="job").items
                    if r.status not in TERMINAL]

        assert tick(T0 + 1) == ["fired"]
        [long_run] = store.claim_due(now=T0 + 2, limit=10)  # the delivery starts: running
        assert store.get(long_run.execution_id).status == "running"
        expect = {"skip": ["skipped"], "queue": ["queued"], "allow": ["fired"]}[policy]
        assert tick(T0 + HOUR + 1) == expect
        assert tick(T0 + 2 * HOUR + 1) == expect
        if policy != "allow":
            assert running() == [long_run.execution_id]  # never two at once
        # the queue holds one fire, the newest; it waits while the long run goes on
        assert (store.schedule("hourly")["queued_slot"] is not None) == (policy == "queue")
        assert tick(T0 + 2 * HOUR + 30) == []
        store.acknowledge(long_run.execution_id, long_run.token,
                          {"status": "completed", "result": None}, now=T0 + 2 * HOUR + 40)
        after = tick(T0 + 2 * HOUR + 50)
        assert after == (["fired"] if policy == "queue" else [])
        ids = sorted(r.execution_id for r in store.list(workflow="job").items)
        assert ids == sorted(slot_id("hourly", T0 + h * HOUR) for h in FIRED[policy])
        assert store.schedule("hourly")["queued_slot"] is None
    finally:
        store.close()


@pytest.mark.parametrize("policy", ["skip", "queue", "allow"])
def test_overlap_end_to_end_with_three_slots_due_at_once(home, tmp_path, policy):
    gate = tmp_path / "gate"
    slots = minute_slots(3, time.time())
    put_schedule(home, "gated", "gate", slots, params={"gate": str(gate)}, catch_up="all",
                 overlap=policy)
    home.start()
    ids = [slot_id("gated", s) for s in slots]
    with home.client() as c:
        wait_until(lambda: c.schedule("gated")["last_fire_at"], message="the first tick")
        fired = {"skip": ids[:1], "queue": ids[:1], "allow": ids}[policy]
        for i in fired:
            wait_status(home, i, "running")  # all blocked on the gate at once, for allow
        assert sorted(executions_of(home, "gated@")) == fired
        assert c.schedule("gated")["queued"] is (policy == "queue")
    gate.touch()
    final = {"skip": ids[:1], "queue": [ids[0], ids[2]], "allow": ids}[policy]
    for i in final:
        wait_status(home, i, "completed")
    assert sorted(executions_of(home, "gated@")) == final
