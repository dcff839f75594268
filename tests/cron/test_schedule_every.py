"""Interval schedules (`--every`), `schedule set` and `schedule run` against a real daemon
(docs/design.md, "Schedules and paused workflows")."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from cron_support import executions_of, out_json, shell, wait_status, wait_until


@pytest.fixture(scope="module")
def daemon(shared):
    shell(shared, "tick", '# ys: every="2s" tz=UTC\necho tick')
    return shared


def listed(daemon) -> dict[str, dict]:
    return {s["name"]: s for s in out_json(daemon.ys("schedule", "list", "--json"))["schedules"]}


def slot_of(execution_id: str) -> float:
    text = execution_id.split("@", 1)[1]
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()


def test_every_fires_at_creation_plus_k_intervals_and_lists_as_every(daemon):
    added = out_json(daemon.ys("schedule", "add", "pulse", "hello", "--every", "2s", "--json"))
    assert added["cron"] is None and added["every"] == 2
    fired = wait_until(
        lambda: [i for i in executions_of(daemon, "pulse@")] or None,
        timeout=20,
        message="an interval fire",
    )
    created = slot_of(fired[0]) % 2
    assert all(slot_of(i) % 2 == created for i in fired)
    wait_status(daemon, fired[0], "completed")
    assert listed(daemon)["pulse"]["every"] == 2
    table = daemon.ys("schedule", "list")
    assert table.returncode == 0 and "every 2s" in table.stdout
    assert daemon.ys("schedule", "rm", "pulse").returncode == 0


def test_a_shell_header_declares_every(daemon):
    s = wait_until(lambda: listed(daemon).get("tick"), timeout=10, message="tick declared")
    assert s["every"] == 2 and s["cron"] is None and s["source"] == "script"
    wait_until(lambda: executions_of(daemon, "tick@") or None, timeout=20, message="tick fired")


@pytest.mark.parametrize(
    "args",
    [
        ["--every", "0"],
        ["--every", "0.5s"],
        ["--every", "soon"],
        ["--every", "1m", "--cron", "0 3 * * *"],
        [],
    ],
)
def test_bad_every_exits_2_and_stores_nothing(daemon, args):
    result = daemon.ys("schedule", "add", "badevery", "hello", *args)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "badevery" not in listed(daemon)


def test_set_changes_a_schedule_in_place(daemon):
    assert daemon.ys("schedule", "add", "chg", "hello", "--cron", "0 3 * * *").returncode == 0
    s = out_json(daemon.ys("schedule", "set", "chg", "--every", "1h", "-p", "n=5", "--json"))
    assert s["every"] == 3600 and s["cron"] is None and s["params"] == {"n": 5}
    nxt = dt.datetime.fromisoformat(s["next_fire_at"].replace("Z", "+00:00")).timestamp()
    assert 0 < nxt - dt.datetime.now(dt.UTC).timestamp() <= 3600
    s = out_json(
        daemon.ys("schedule", "set", "chg", "--cron", "0 4 * * *", "--tz", "UTC", "--json")
    )
    assert s["cron"] == "0 4 * * *" and s["every"] is None and s["params"] == {"n": 5}
    assert s["next_fire_at"].endswith("T04:00:00.000Z")
    assert daemon.ys("schedule", "rm", "chg").returncode == 0


def test_set_refuses_unknown_declared_and_bad_input(daemon):
    assert daemon.ys("schedule", "set", "nosuch", "--every", "1m").returncode == 4
    wait_until(lambda: listed(daemon).get("tick"), timeout=10, message="tick declared")
    declared = daemon.ys("schedule", "set", "tick", "--every", "1m")
    assert declared.returncode == 3
    assert declared.stderr.strip() == (
        "FAILED_PRECONDITION: schedule tick is declared by its script; change the declaration there"
    )
    assert listed(daemon)["tick"]["every"] == 2  # unchanged
    assert daemon.ys("schedule", "add", "keep", "hello", "--cron", "0 3 * * *").returncode == 0
    both = daemon.ys("schedule", "set", "keep", "--every", "1m", "--cron", "0 1 * * *")
    assert both.returncode == 2
    zero = daemon.ys("schedule", "set", "keep", "--every", "0")
    assert zero.returncode == 2
    assert listed(daemon)["keep"]["cron"] == "0 3 * * *"
    assert daemon.ys("schedule", "rm", "keep").returncode == 0


def test_run_fires_once_now_outside_the_slots(daemon):
    added = daemon.ys("schedule", "add", "byhand", "hello", "--cron", "0 3 * * *", "-p", "n=3")
    assert added.returncode == 0, added.stderr
    result = out_json(daemon.ys("schedule", "run", "byhand", "--json"))
    eid = result["execution_id"]
    assert eid.startswith("byhand@manual-") and eid.endswith("Z")
    record = wait_status(daemon, eid, "completed")
    assert record["params"] == {"n": 3}
    assert record["context"] == {"schedule": "byhand", "manual": True}
    assert record["outcome"]["result"] == "hello 3"
    assert daemon.ys("schedule", "run", "nosuch").returncode == 4
    assert json.loads(daemon.ys("schedule", "list", "--json").stdout)
    assert daemon.ys("schedule", "rm", "byhand").returncode == 0
