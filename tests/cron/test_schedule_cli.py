"""`ys schedule add|list|next|rm|pause|resume` against a real daemon: the JSON shapes of
docs/API.md, exit codes by error, and schedules that scripts declare."""

from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo

import pytest
from cron_support import out_json, shell, wait_until

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
FIELDS = {
    "name",
    "workflow",
    "cron",
    "tz",
    "params",
    "catch_up",
    "overlap",
    "paused",
    "next_fire_at",
    "last_fire_at",
}

DECLARED = """
    import ys

    @ys.workflow(schedule="0 3 * * *", tz="UTC")
    def main(step, params):
        return 1
"""


@pytest.fixture(scope="module")
def daemon(shared):
    shared.write("nightly.py", DECLARED)
    shell(shared, "tidy", '# ys: schedule="*/5 * * * *"\necho tidy')
    return shared


def listed(daemon) -> dict[str, dict]:
    return {s["name"]: s for s in out_json(daemon.ys("schedule", "list", "--json"))["schedules"]}


def test_add_list_next_pause_resume_rm_with_json(daemon):
    added = out_json(
        daemon.ys(
            "schedule",
            "add",
            "backup",
            "hello",
            "--cron",
            "30 2 * * *",
            "--tz",
            "Europe/Paris",
            "-p",
            "n=7",
            "--overlap",
            "queue",
            "--catch-up",
            "all",
            "--max-late",
            "2h",
            "--jitter",
            "10m",
            "--json",
        )
    )
    assert FIELDS <= set(added)
    assert added["name"] == "backup" and added["workflow"] == "hello"
    assert (added["cron"], added["tz"], added["params"]) == ("30 2 * * *", "Europe/Paris", {"n": 7})
    assert (added["catch_up"], added["overlap"], added["paused"]) == ("all", "queue", False)
    assert added["max_late"] == 7200 and added["jitter"] == 600
    assert ISO.match(added["next_fire_at"]) and added["last_fire_at"] is None

    item = listed(daemon)["backup"]
    assert FIELDS <= set(item) and item["source"] == "cli"
    assert item["next_fire_at"] == added["next_fire_at"]

    three = daemon.ys("schedule", "next", "backup", "-n", "3")
    assert three.returncode == 0, three.stderr
    times = three.stdout.splitlines()
    assert len(times) == 3 and all(ISO.match(t) for t in times)
    assert times == sorted(times) and len(set(times)) == 3
    as_json = out_json(daemon.ys("schedule", "next", "backup", "-n", "3", "--json"))
    assert as_json == {"fire_times": times, "paused": False}
    # 02:30 in Paris, pushed by the schedule's fixed jitter (under 10 minutes)
    first = dt.datetime.fromisoformat(times[0]).astimezone(ZoneInfo("Europe/Paris"))
    assert first.hour == 2 and 30 <= first.minute < 40

    paused = out_json(daemon.ys("schedule", "pause", "backup", "--json"))
    assert paused["paused"] is True and paused["next_fire_at"] is None
    assert listed(daemon)["backup"]["paused"] is True
    resumed = out_json(daemon.ys("schedule", "resume", "backup", "--json"))
    assert resumed["paused"] is False and ISO.match(resumed["next_fire_at"])

    removed = out_json(daemon.ys("schedule", "rm", "backup", "--json"))
    assert removed == {"name": "backup", "removed": True}
    assert "backup" not in listed(daemon)


def test_people_output_and_the_default_zone(daemon):
    result = daemon.ys(
        "schedule",
        "add",
        "plain",
        "hello",
        "--cron",
        "*/10 * * * *",
        env={"TZ": "America/New_York"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and "schedule plain triggers hello" in result.stderr
    assert listed(daemon)["plain"]["tz"] == "America/New_York"  # the caller's zone, by name
    table = daemon.ys("schedule", "list")
    assert table.returncode == 0
    row = next(line for line in table.stdout.splitlines() if line.startswith("plain "))
    assert "*/10 * * * *" in row and "America/New_York" in row and "active" in row
    assert daemon.ys("schedule", "rm", "plain").returncode == 0


@pytest.mark.parametrize(
    "args,code,error",
    [
        (["bad", "hello", "--cron", "61 * * * *"], 2, "INVALID_ARGUMENT"),
        (["bad", "hello", "--cron", "* * *"], 2, "INVALID_ARGUMENT"),
        (["bad", "hello", "--cron", "0 3 * * *", "--tz", "Mars/Olympus"], 2, "INVALID_ARGUMENT"),
        (["bad", "hello", "--cron", "0 3 * * *", "--max-late", "soon"], 2, "INVALID_ARGUMENT"),
        (["bad", "hello", "--cron", "0 3 * * *", "--overlap", "sometimes"], 2, "INVALID_ARGUMENT"),
        (["bad@x", "hello", "--cron", "0 3 * * *"], 2, "INVALID_ARGUMENT"),
        (["bad", "no-such-workflow", "--cron", "0 3 * * *"], 4, "WORKFLOW_NOT_FOUND"),
    ],
)
def test_bad_schedules_exit_by_their_error_and_store_nothing(daemon, args, code, error):
    result = daemon.ys("schedule", "add", *args)
    assert result.returncode == code, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{error}: ") and "; " in lines[0]
    assert "bad" not in listed(daemon) and "bad@x" not in listed(daemon)


def test_a_name_in_use_is_a_conflict_and_the_first_schedule_stays(daemon):
    assert daemon.ys("schedule", "add", "twice", "hello", "--cron", "0 1 * * *").returncode == 0
    again = daemon.ys("schedule", "add", "twice", "gate", "--cron", "0 2 * * *")
    assert again.returncode == 3, again.stderr
    assert again.stderr.startswith("FAILED_PRECONDITION: ")
    assert (listed(daemon)["twice"]["workflow"], listed(daemon)["twice"]["cron"]) == (
        "hello",
        "0 1 * * *",
    )
    assert daemon.ys("schedule", "rm", "twice").returncode == 0


@pytest.mark.parametrize("verb", [["next"], ["rm"], ["pause"], ["resume"]])
def test_an_unknown_schedule_exits_4(daemon, verb):
    result = daemon.ys("schedule", *verb, "nobody")
    assert result.returncode == 4
    assert result.stderr.startswith("NOT_FOUND: ") and "ys schedule list" in result.stderr


def test_schedules_declared_by_scripts_are_listed_with_source_script(daemon):
    schedules = wait_until(
        lambda: (lambda s: s if {"nightly", "tidy"} <= set(s) else None)(listed(daemon)),
        message="the declared schedules",
    )
    nightly, tidy = schedules["nightly"], schedules["tidy"]
    assert (nightly["workflow"], nightly["cron"], nightly["tz"]) == ("nightly", "0 3 * * *", "UTC")
    assert (tidy["workflow"], tidy["cron"]) == ("tidy", "*/5 * * * *")
    assert nightly["source"] == tidy["source"] == "script"
    assert nightly["next_fire_at"].endswith("T03:00:00.000Z")
    # removing one by hand would not last (the script declares it): refused, pause instead
    refused = daemon.ys("schedule", "rm", "nightly")
    assert refused.returncode == 3 and "pause" in refused.stderr
    assert out_json(daemon.ys("schedule", "pause", "tidy", "--json"))["paused"] is True
    daemon.write("tidy", '#!/bin/sh\n# ys: schedule="*/10 * * * *"\necho tidy\n', mode=0o700)
    tidy = wait_until(
        lambda: (lambda s: s if s["cron"] == "*/10 * * * *" else None)(listed(daemon)["tidy"]),
        message="the new declaration",
    )
    assert tidy["paused"] is True  # a script's new declaration keeps the pause


def workflow(daemon, name: str) -> dict | None:
    with daemon.client() as c:
        return {w["name"]: w for w in c.workflows()["workflows"]}.get(name)


def applied(daemon, tag: str) -> None:
    """Wait until the registry has applied every change so far: it applies them one by one,
    so once a script written now has its schedule listed, the earlier ones are done."""
    daemon.write(f"later-{tag}.py", DECLARED)
    wait_until(lambda: f"later-{tag}" in listed(daemon), message="a later change")


def test_a_script_that_stops_loading_keeps_its_schedule_and_pause(daemon):
    source = DECLARED.replace("0 3 * * *", "0 4 * * 1")
    daemon.write("weekly.py", source)
    wait_until(lambda: "weekly" in listed(daemon), message="the declared schedule")
    assert daemon.ys("schedule", "pause", "weekly").returncode == 0
    daemon.write("weekly.py", source + "\nthis is not python\n")
    wait_until(lambda: (workflow(daemon, "weekly") or {}).get("error"), message="the error")
    applied(daemon, "broken")
    assert listed(daemon)["weekly"]["paused"] is True  # still there, still paused
    daemon.write("weekly.py", source)
    wait_until(lambda: workflow(daemon, "weekly")["error"] is None, message="the fix")
    assert listed(daemon)["weekly"]["paused"] is True


def test_a_script_never_takes_over_a_schedule_added_by_hand(daemon):
    assert daemon.ys("schedule", "add", "clash", "hello", "--cron", "0 1 * * *").returncode == 0
    daemon.write("clash.py", DECLARED.replace("0 3 * * *", "0 5 * * *"))
    applied(daemon, "clash")
    s = listed(daemon)["clash"]
    assert (s["workflow"], s["cron"], s["source"]) == ("hello", "0 1 * * *", "cli")
    assert daemon.ys("schedule", "rm", "clash").returncode == 0
    # once the name is free, the script's declaration applies (at its next change)
    daemon.write("clash.py", DECLARED.replace("0 3 * * *", "0 6 * * *"))
    s = wait_until(lambda: listed(daemon).get("clash"), message="the script's schedule")
    assert (s["workflow"], s["cron"], s["source"]) == ("clash", "0 6 * * *", "script")
