"""`ys schedule next` on a paused schedule says it is paused and lists no fire time (it fires
at none); a schedule name is refused for the reason that applies to it."""

from __future__ import annotations

import json

import pytest
from cron_support import out_json


def test_next_of_a_paused_schedule_says_it_is_paused_and_lists_nothing(shared):
    assert shared.ys("schedule", "add", "held", "hello", "--cron", "*/5 * * * *").returncode == 0
    active = out_json(shared.ys("schedule", "next", "held", "-n", "2", "--json"))
    assert len(active["fire_times"]) == 2 and active["paused"] is False
    assert shared.ys("schedule", "pause", "held").returncode == 0

    people = shared.ys("schedule", "next", "held")
    assert people.returncode == 0, people.stderr
    assert people.stdout == ""
    assert "held is paused" in people.stderr and "ys schedule resume held" in people.stderr
    machine = shared.ys("schedule", "next", "held", "--json")
    assert json.loads(machine.stdout) == {"fire_times": [], "paused": True}

    assert shared.ys("schedule", "resume", "held").returncode == 0
    again = shared.ys("schedule", "next", "held", "-n", "2")
    assert len(again.stdout.split()) == 2 and "paused" not in again.stderr
    assert shared.ys("schedule", "rm", "held").returncode == 0


def test_pausing_a_paused_schedule_says_it_was_already_paused_and_resume_likewise(shared):
    assert shared.ys("schedule", "add", "twice", "hello", "--cron", "*/5 * * * *").returncode == 0
    first = shared.ys("schedule", "pause", "twice")
    assert first.returncode == 0 and first.stderr.strip() == "paused schedule twice"
    second = shared.ys("schedule", "pause", "twice")
    assert second.returncode == 0, second.stderr
    assert second.stderr.strip() == "schedule twice was already paused; nothing changed"
    assert out_json(shared.ys("schedule", "pause", "twice", "--json"))["paused"] is True
    resumed = shared.ys("schedule", "resume", "twice")
    assert resumed.returncode == 0 and resumed.stderr.startswith("resumed schedule twice; next at")
    again = shared.ys("schedule", "resume", "twice")
    assert again.returncode == 0, again.stderr
    assert again.stderr.startswith("schedule twice was not paused; nothing changed; next at")
    assert shared.ys("schedule", "rm", "twice").returncode == 0


@pytest.mark.parametrize(
    "name,reason",
    [
        ("x" * 200, "200 characters long; use at most 128"),
        ("a@b", "holds '@'"),
        ("tab\there", "control characters"),
        ("é" * 120, "use at most 235"),
    ],
)
def test_a_bad_schedule_name_is_refused_for_its_own_reason(shared, name, reason):
    result = shared.ys("schedule", "add", name, "hello", "--cron", "0 3 * * *")
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith("INVALID_ARGUMENT: ") and reason in line, line
    if "@" not in name:
        assert "'@'" not in line  # not the reason
    names = {s["name"] for s in out_json(shared.ys("schedule", "list", "--json"))["schedules"]}
    assert name not in names


def test_a_name_of_128_characters_is_accepted(shared):
    name = "n" * 128
    assert shared.ys("schedule", "add", name, "hello", "--cron", "0 3 * * *").returncode == 0
    assert shared.ys("schedule", "rm", name).returncode == 0


def test_the_daemon_answers_no_fire_times_for_a_paused_schedule(shared):
    """GET /v1/schedules/{name}/next itself, not only the CLI, says a paused schedule fires
    at no time."""
    assert (
        shared.ys("schedule", "add", "api-paused", "hello", "--cron", "0 3 * * *").returncode == 0
    )
    assert shared.ys("schedule", "pause", "api-paused").returncode == 0
    with shared.client() as c:
        assert c.schedule_next("api-paused", 3) == {"fire_times": [], "paused": True}
    assert shared.ys("schedule", "resume", "api-paused").returncode == 0
    with shared.client() as c:
        out = c.schedule_next("api-paused", 3)
    assert out["paused"] is False and len(out["fire_times"]) == 3
