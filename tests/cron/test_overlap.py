"""Overlap policies with a long-running execution, end to end: skip, queue and allow with a real
daemon whose schedule has three slots due at once and a workflow that blocks until the test
releases it. (In the store, with the clock injected: tests/store/test_schedule_client.py.)"""

from __future__ import annotations

import time

import pytest
from cron_support import executions_of, minute_slots, put_schedule, wait_status, wait_until

from ys.contract import slot_id


@pytest.mark.parametrize("policy", ["skip", "queue", "allow"])
def test_overlap_end_to_end_with_three_slots_due_at_once(home, tmp_path, policy):
    gate = tmp_path / "gate"
    slots = minute_slots(3, time.time())
    put_schedule(
        home, "gated", "gate", slots, params={"gate": str(gate)}, catch_up="all", overlap=policy
    )
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
