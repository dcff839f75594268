"""What counts as a cron expression, wherever one enters (`ys schedule add`, the decorator,
a shell header): five fields or a crontab shortcut (@hourly ... @yearly). Six fields, which
cronsim reads with a seconds field first ("0 3 * * * *" would run hourly), and @reboot are
refused with a line that says what to write instead; nothing is stored."""

from __future__ import annotations

import datetime as dt

import pytest
from cron_support import out_json, shell, wait_until

from tests.support import parse_iso

HOUR = 3600.0


def listed(daemon) -> dict[str, dict]:
    return {s["name"]: s for s in out_json(daemon.ys("schedule", "list", "--json"))["schedules"]}


def script(schedule: str) -> str:
    return f"""
        import ys

        @ys.workflow(schedule={schedule!r}, tz="UTC")
        def main(step, params):
            return 1
    """


@pytest.mark.parametrize(
    "expr,says",
    [
        ("0 3 * * * *", "6 fields (ys has no seconds field)"),
        ("*/5 * * * * *", "6 fields"),
        ("0 3 * * * 2026", "6 fields"),
        ("0 3 * *", "4 fields"),
        ("@reboot", "ys trigger"),
        ("@fortnightly", "no such shortcut"),
    ],
)
def test_anything_but_five_fields_or_a_shortcut_is_refused(shared, expr, says):
    result = shared.ys("schedule", "add", "wrong", "hello", "--cron", expr, "--tz", "UTC")
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("INVALID_ARGUMENT: bad cron expression") and says in line, line
    assert "@daily" in line or expr == "@reboot", line  # says what to write instead
    assert "wrong" not in listed(shared)


@pytest.mark.parametrize(
    "expr,first,step",
    [
        ("@hourly", lambda d: d.minute == 0, HOUR),
        ("@daily", lambda d: (d.hour, d.minute) == (0, 0), 24 * HOUR),
        ("@midnight", lambda d: (d.hour, d.minute) == (0, 0), 24 * HOUR),
        ("@weekly", lambda d: (d.weekday(), d.hour, d.minute) == (6, 0, 0), 7 * 24 * HOUR),
        ("@monthly", lambda d: (d.day, d.hour, d.minute) == (1, 0, 0), None),
        ("@yearly", lambda d: (d.month, d.day, d.hour) == (1, 1, 0), None),
        ("@annually", lambda d: (d.month, d.day, d.hour) == (1, 1, 0), None),
    ],
)
def test_the_crontab_shortcuts_are_accepted(shared, expr, first, step):
    name = "short-" + expr[1:]
    added = out_json(
        shared.ys("schedule", "add", name, "hello", "--cron", expr, "--tz", "UTC", "--json")
    )
    assert added["cron"] == expr  # kept as written
    times = shared.ys("schedule", "next", name, "-n", "3").stdout.split()
    fires = [parse_iso(t) for t in times]
    assert len(fires) == 3
    assert all(first(dt.datetime.fromtimestamp(f, tz=dt.UTC)) for f in fires), times
    if step is not None:
        assert [b - a for a, b in zip(fires, fires[1:], strict=False)] == [step, step]
    assert shared.ys("schedule", "rm", name).returncode == 0


def test_a_six_field_schedule_is_refused_in_a_decorator_and_a_shell_header(shared):
    shared.write("six.py", script("0 3 * * * *"))
    shell(shared, "sixsh", '# ys: schedule="0 3 * * * *"\necho six')
    shared.write("daily.py", script("@daily"))
    shell(shared, "hourly", '# ys: schedule="@hourly" tz=UTC\necho hourly')
    # the registry applies changes in order: once the shortcuts are listed, the six-field
    # declarations before them have been seen (and refused)
    schedules = wait_until(
        lambda: (lambda s: s if {"daily", "hourly"} <= set(s) else None)(listed(shared)),
        message="the shortcut declarations",
    )
    assert "six" not in schedules and "sixsh" not in schedules
    assert schedules["daily"]["next_fire_at"].endswith("T00:00:00.000Z")
    assert schedules["hourly"]["next_fire_at"].endswith(":00:00.000Z")
    assert (schedules["daily"]["cron"], schedules["hourly"]["cron"]) == ("@daily", "@hourly")


def test_next_of_a_schedule_stored_with_six_fields_says_why_it_cannot_fire(shared):
    """A six-field schedule stored before ys refused them (the row is set as an older ys
    left it): `ys schedule next` exits 3 FAILED_PRECONDITION saying what to do, not INTERNAL."""
    import sqlite3

    assert shared.ys("schedule", "add", "old-six", "hello", "--cron", "0 3 * * *").returncode == 0
    with sqlite3.connect(shared.db) as conn:
        conn.execute("UPDATE schedules SET cron='0 3 * * * *' WHERE name='old-six'")
    out = shared.ys("schedule", "next", "old-six")
    assert out.returncode == 3, out.stderr
    assert out.stderr.startswith("FAILED_PRECONDITION:") and "6 fields" in out.stderr
    assert "ys schedule rm" in out.stderr
    assert shared.ys("schedule", "rm", "old-six").returncode == 0
