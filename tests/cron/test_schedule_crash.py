"""A daemon SIGKILLed in the middle of a fire, then restarted: the slot still has exactly one
execution. The fire (admission + cursor) is one transaction, so a kill inside it leaves
nothing and the restarted daemon fires the slot; a kill after it leaves the fire, and the
moved cursor (and the slot's ID) keep the restarted daemon from firing it again.

Deterministic: the schedule is written into the database before the daemon starts, with its
one slot already due, and YS_CRASH_POINTS kills the daemon at the named point."""

from __future__ import annotations

import sqlite3
import time

import pytest
from cron_support import executions_of, minute_slots, put_schedule, spawn, wait_status

from ys.contract import slot_id


def committed(db) -> list[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT execution_id FROM executions")]
    finally:
        conn.close()


@pytest.mark.parametrize("point", ["schedule.in_fire", "schedule.after_fire"])
def test_a_daemon_killed_during_a_fire_leaves_exactly_one_execution_for_the_slot(
    home, tmp_path, point
):
    [slot] = minute_slots(1, time.time())
    put_schedule(home, "tick", "hello", [slot], params={"n": 1})
    marker = tmp_path / "crashed"
    home.env["YS_CRASH_POINTS"] = f"{point}@{marker}"
    proc = spawn(home)
    assert proc.wait(timeout=30) == -9, home.log()[-2000:]
    assert marker.exists()
    expected = slot_id("tick", slot)
    # inside the transaction nothing committed; after it the fire did
    assert committed(home.db) == ([] if point == "schedule.in_fire" else [expected])

    del home.env["YS_CRASH_POINTS"]
    home.start()
    record = wait_status(home, expected, "completed")
    assert record["context"] == {
        "schedule": "tick",
        "slot": expected.split("@")[1],
        "catch_up": record["context"]["catch_up"],
    }
    assert record["outcome"]["result"] == "hello 1"
    assert list(executions_of(home, "tick@")) == [expected]
    with home.client() as c:
        s = c.schedule("tick")
        assert [e["kind"] for e in c.history(expected)["events"]].count("admitted") == 1
    assert s["last_execution_id"] == expected and s["last_fire_at"] is not None
    assert s["next_fire_at"] > record["admitted_at"]  # the cursor moved past the slot
