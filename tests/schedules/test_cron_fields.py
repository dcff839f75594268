"""ys.cron.fields and validate: the one check every cron expression passes. Pure."""

from __future__ import annotations

import datetime as dt

import pytest

from ys import cron


@pytest.mark.parametrize("expr,five", [
    ("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"),
    ("@weekly", "0 0 * * 0"), ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"), ("@DAILY", "0 0 * * *"), (" 0 3 * * * ", "0 3 * * *"),
])
def test_shortcuts_expand_and_five_fields_pass(expr, five):
    assert cron.fields(expr) == five
    cron.validate(expr, "UTC")


@pytest.mark.parametrize("expr", ["0 3 * * * *", "* * * * * *", "0 3 * *", "", "@reboot",
                                  "@often"])
def test_six_fields_and_anything_else_are_refused(expr):
    with pytest.raises(ValueError, match="bad cron expression"):
        cron.validate(expr, "UTC")


def test_a_six_field_expression_never_reaches_cronsim_as_seconds_first():
    # cronsim would read "0 3 * * * *" as second 0 of minute 3 of every hour
    with pytest.raises(ValueError, match="6 fields"):
        cron.slots_after("0 3 * * * *", "UTC", 0.0, 2)


def test_planning_a_shortcut_fires_at_its_five_fields_slots():
    start = dt.datetime(2026, 6, 1, 22, 30, tzinfo=dt.UTC).timestamp()
    fires, _ = cron.plan("@hourly", "UTC", start, start + 3600 + 30)
    assert [f.slot for f in fires] == [start + 1800]


def test_a_six_field_schedule_stored_before_the_check_stops_being_due(tmp_path):
    """A row written before six fields were refused: its tick says why once and leaves it
    with no next fire, instead of failing at every tick; resuming it says what to do."""
    import sqlite3

    from ys.errors import InvalidArgument
    from ys.store.sqlite import SqliteStore

    t0 = dt.datetime(2026, 6, 2, 3, 0, tzinfo=dt.UTC).timestamp()
    store = SqliteStore(tmp_path / "ys.db")
    try:
        store.schedule_add("old", "job", "0 3 * * *", tz="UTC", now=t0 - 86400)
        conn = sqlite3.connect(tmp_path / "ys.db")
        with conn:
            conn.execute("UPDATE schedules SET cron='0 3 * * * *' WHERE name='old'")
        conn.close()
        actions = store.schedule_tick("old", now=t0 + 1)
        assert [a["action"] for a in actions] == ["refused"]
        assert "6 fields" in actions[0]["why"]
        assert store.schedule("old")["next_fire_at"] is None
        assert store.list(workflow="job").items == []
        store.schedule_pause("old", True, now=t0 + 2)
        with pytest.raises(InvalidArgument, match="add it again"):
            store.schedule_pause("old", False, now=t0 + 3)
    finally:
        store.close()
