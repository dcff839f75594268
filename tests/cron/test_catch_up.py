"""`--catch-up once` after the daemon was down for several slots: one execution, for the
latest slot, whatever --overlap says. The schedule is written into the database before the
daemon starts, with two slots missed and the latest one just due."""

from __future__ import annotations

import time

import pytest
from cron_support import executions_of, put_schedule, wait_status, wait_until

from ys.contract import slot_id


@pytest.mark.parametrize("overlap", ["skip", "allow"])
def test_catch_up_once_fires_the_latest_slot_after_the_daemon_was_down(home, overlap):
    now = time.time()
    latest = now - now % 60  # on time: under a minute ago
    slots = [latest - 240, latest - 180, latest]  # the first two missed while it was down
    put_schedule(home, "tick", "hello", slots, catch_up="once", overlap=overlap)
    home.start()
    with home.client() as c:
        wait_until(lambda: c.schedule("tick")["last_fire_at"], message="the first tick")
        schedule = c.schedule("tick")
    expected = slot_id("tick", latest)
    record = wait_status(home, expected, "completed")
    assert record["context"]["catch_up"] is True  # it stands for the missed slots too
    assert list(executions_of(home, "tick@")) == [expected]
    assert schedule["last_execution_id"] == expected
