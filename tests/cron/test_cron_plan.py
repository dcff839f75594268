"""Cron planning with the clock passed in: DST in America/New_York, catch-up after a laptop
sleep, max-late, jitter. Nothing sleeps."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from ys import cron

NY = "America/New_York"
UTC = dt.UTC


def t(y, mo, d, h, mi, tz=NY) -> float:
    return dt.datetime(y, mo, d, h, mi, tzinfo=ZoneInfo(tz)).timestamp()


def local(ts: float, tz=NY) -> str:
    return dt.datetime.fromtimestamp(ts, tz=ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M %Z")


def fires_between(expr: str, start: float, end: float, step: float = 60.0, tz=NY) -> list[float]:
    """Drive the planner minute by minute (an awake machine) and collect every fire."""
    cursor, now, out = start, start, []
    while now <= end:
        fires, cursor = cron.plan(expr, tz, cursor, now)
        out += [f.slot for f in fires]
        now += step
    return out


def test_fixed_time_job_runs_once_on_the_fall_back_day():
    # 2026-11-01: 01:00-02:00 happens twice in New York.
    fires = fires_between("30 1 * * *", t(2026, 10, 31, 12, 0), t(2026, 11, 1, 12, 0))
    assert [local(f) for f in fires] == ["2026-11-01 01:30 EDT"]


def test_job_in_the_skipped_hour_runs_at_three_on_the_spring_forward_day():
    # 2026-03-08: 02:00-03:00 does not exist in New York.
    fires = fires_between("30 2 * * *", t(2026, 3, 7, 12, 0), t(2026, 3, 8, 12, 0))
    assert [local(f) for f in fires] == ["2026-03-08 03:00 EDT"]


def test_every_half_hour_follows_local_time_through_fall_back():
    fires = fires_between("*/30 * * * *", t(2026, 11, 1, 0, 10), t(2026, 11, 1, 2, 10))
    assert [local(f) for f in fires] == [
        "2026-11-01 00:30 EDT",
        "2026-11-01 01:00 EDT",
        "2026-11-01 01:30 EDT",
        "2026-11-01 01:00 EST",
        "2026-11-01 01:30 EST",
        "2026-11-01 02:00 EST",
    ]


def test_every_half_hour_follows_local_time_through_spring_forward():
    fires = fires_between("*/30 * * * *", t(2026, 3, 8, 0, 10), t(2026, 3, 8, 4, 10))
    assert [local(f) for f in fires] == [
        "2026-03-08 00:30 EST",
        "2026-03-08 01:00 EST",
        "2026-03-08 01:30 EST",
        "2026-03-08 03:00 EDT",
        "2026-03-08 03:30 EDT",
        "2026-03-08 04:00 EDT",
    ]


def sleep_over(
    expr: str, catch_up: str, max_late: float | None = None, tz: str = "UTC"
) -> list[cron.Fire]:
    """A laptop that slept from 22:00 to 06:00 (8 hours), then wakes."""
    before = t(2026, 6, 1, 22, 0, tz)
    after = t(2026, 6, 2, 6, 0, tz)
    fires, cursor = cron.plan(expr, tz, before, after, catch_up=catch_up, max_late=max_late)
    again, _ = cron.plan(expr, tz, cursor, after + 1, catch_up=catch_up, max_late=max_late)
    assert again == []  # the policy is applied once, never again for the same slots
    return fires


def test_daily_schedule_across_an_eight_hour_sleep_fires_once_with_catch_up_once():
    fires = sleep_over("0 3 * * *", "once")
    assert [(local(f.slot, "UTC"), f.catch_up) for f in fires] == [("2026-06-02 03:00 UTC", True)]


def test_hourly_schedule_across_an_eight_hour_sleep_fires_once_with_catch_up_once():
    fires = sleep_over("0 * * * *", "once")
    # one run for the whole sleep, for its latest slot: 06:00 (on time) stands for 23:00-05:00;
    # firing 05:00 too would run twice, and under overlap=skip 06:00 would be skipped
    assert [(local(f.slot, "UTC"), f.catch_up) for f in fires] == [("2026-06-02 06:00 UTC", True)]


def test_every_missed_slot_fires_with_catch_up_all():
    fires = sleep_over("0 * * * *", "all")
    assert [f.catch_up for f in fires].count(True) == 7  # 23:00 .. 05:00
    assert len(fires) == 8


def test_no_missed_slot_fires_with_catch_up_skip():
    assert sleep_over("0 3 * * *", "skip") == []
    assert [f.catch_up for f in sleep_over("0 * * * *", "skip")] == [False]  # 06:00 on time


def test_missed_slots_older_than_max_late_do_not_fire():
    assert sleep_over("0 3 * * *", "once", max_late=3600) == []  # 03:00 is 3 h late
    assert len(sleep_over("0 3 * * *", "all", max_late=4 * 3600)) == 1


def test_jitter_is_deterministic_per_schedule_and_within_bounds():
    a = cron.jitter_offset("backup", 600)
    assert a == cron.jitter_offset("backup", 600)
    assert 0 <= a < 600
    assert cron.jitter_offset("backup", 0) == 0
    offsets = {cron.jitter_offset(f"s{i}", 600) for i in range(20)}
    assert len(offsets) > 10  # schedules spread out


def test_a_jittered_slot_is_due_only_after_its_offset():
    off = cron.jitter_offset("j", 300)
    slot = t(2026, 6, 2, 3, 0, "UTC")
    before, _ = cron.plan("0 3 * * *", "UTC", slot - 60, slot + off - 1, jitter=300, name="j")
    after, _ = cron.plan("0 3 * * *", "UTC", slot - 60, slot + off + 1, jitter=300, name="j")
    assert before == [] and [f.slot for f in after] == [slot]


@pytest.mark.parametrize("expr", ["61 * * * *", "* * *", "nonsense"])
def test_bad_cron_expressions_are_refused(expr):
    with pytest.raises(ValueError, match="bad cron expression"):
        cron.validate(expr, "UTC")


def test_unknown_time_zone_is_refused():
    with pytest.raises(ValueError, match="unknown time zone"):
        cron.validate("0 3 * * *", "Mars/Olympus")
