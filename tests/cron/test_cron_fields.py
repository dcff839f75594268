"""ys.cron.fields and validate: the one check every cron expression passes. Pure."""

from __future__ import annotations

import datetime as dt

import pytest

from ys import cron


@pytest.mark.parametrize(
    "expr,five",
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@DAILY", "0 0 * * *"),
        (" 0 3 * * * ", "0 3 * * *"),
    ],
)
def test_shortcuts_expand_and_five_fields_pass(expr, five):
    assert cron.fields(expr) == five
    cron.validate(expr, "UTC")


@pytest.mark.parametrize("expr", ["0 3 * * * *", "* * * * * *", "0 3 * *", "", "@reboot", "@often"])
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
