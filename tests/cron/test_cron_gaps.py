"""Planning after long gaps, with the clock passed in: `once` is one fire for the latest slot
due, and a gap of more slots than the planner walks keeps the newest ones. Pure."""

from __future__ import annotations

import datetime as dt

from ys import cron

T = dt.datetime(2026, 6, 2, 6, 0, 20, tzinfo=dt.UTC).timestamp()  # 20 s after 06:00


def test_once_fires_only_the_latest_slot_when_it_is_still_on_time():
    fires, cursor = cron.plan("0 * * * *", "UTC", T - 3 * 3600 - 60, T, catch_up="once")
    assert [(f.slot, f.catch_up) for f in fires] == [(T - 20, True)]
    assert cursor == T - 20


def test_all_and_skip_are_unchanged_by_an_on_time_latest_slot():
    all_, _ = cron.plan("0 * * * *", "UTC", T - 3 * 3600 - 60, T, catch_up="all")
    skip, _ = cron.plan("0 * * * *", "UTC", T - 3 * 3600 - 60, T, catch_up="skip")
    assert [f.catch_up for f in all_] == [True, True, True, False]
    assert [(f.slot, f.catch_up) for f in skip] == [(T - 20, False)]


def test_a_gap_longer_than_the_walk_keeps_the_newest_slots():
    # every minute, 30 days down: 43 200 slots, more than MAX_SLOTS
    start = T - 30 * 86400
    once, cursor = cron.plan("* * * * *", "UTC", start, T, catch_up="once")
    assert [f.slot for f in once] == [T - 20] and cursor == T - 20
    every, cursor = cron.plan("* * * * *", "UTC", start, T, catch_up="all")
    assert len(every) == cron.MAX_SLOTS and every[-1].slot == T - 20 and cursor == T - 20
    assert [b.slot - a.slot for a, b in zip(every, every[1:], strict=False)] == [60.0] * (
        cron.MAX_SLOTS - 1
    )


def test_slots_between_is_exclusive_of_after_and_inclusive_of_until():
    at = T - 20
    assert cron.slots_between("0 * * * *", "UTC", at - 3600, at) == [at]
    assert cron.slots_between("0 * * * *", "UTC", at, at + 3599) == []
    assert cron.slots_between("0 * * * *", "UTC", at - 0.5, at + 0.5) == [at]
