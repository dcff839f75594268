"""`ys workflows pause W` held in the shared PostgreSQL database (docs/design.md, "Schedules and
paused workflows"): paused from one box, no box delivers W; resumed from the other, it runs.
Interval schedules from either box: a slot is one execution."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import DaemonHandle, make_home, wait_until

HELLO = """
import ys

@ys.workflow
def main(step, params):
    return "hi"
"""


def home_on(root: Path, url: str, name: str) -> DaemonHandle:
    (root / name).mkdir()
    h = make_home(root / name, YS_DATABASE=url)
    h.write("hello.py", HELLO)
    return h


def test_a_pause_from_one_box_holds_every_box(tmp_path, pg_url):
    a = home_on(tmp_path, pg_url, "a")
    b = home_on(tmp_path, pg_url, "b")
    with a, b:
        a.start()
        b.start()
        assert a.ys("workflows", "pause", "hello").returncode == 0
        listed = json.loads(b.ys("workflows", "--json").stdout)["workflows"]
        assert next(w for w in listed if w["name"] == "hello")["paused"] is True
        ids = [b.ys("trigger", "hello", "--id", f"p{i}").stdout.strip() for i in range(4)]
        ps = json.loads(a.ys("ps", "--json").stdout)["executions"]
        assert {r["execution_id"] for r in ps} == set(ids)
        assert all(r["waiting_for"] == "workflow paused" for r in ps)
        assert b.ys("workflows", "resume", "hello").returncode == 0

        def finished() -> bool:
            with a.client() as c:
                return all(c.get(i)["status"] == "completed" for i in ids)

        wait_until(finished, timeout=30, message="the held executions to run once resumed")
        with a.client() as c:
            assert all(c.get(i)["attempts"] == 1 for i in ids)


EVERY = """
import ys

@ys.workflow(every="1s", tz="UTC")
def main(step, params):
    return "tick"
"""


def test_an_interval_slot_is_one_execution_across_daemons(tmp_path, pg_url):
    a = home_on(tmp_path, pg_url, "a")
    b = home_on(tmp_path, pg_url, "b")
    with a, b:
        for h in (a, b):
            h.write("pulse.py", EVERY)
        a.start()
        b.start()

        def fired() -> list[dict] | None:
            with a.client() as c:
                items = c.list(limit=1000)["executions"]
            done = [r for r in items if r["execution_id"].startswith("pulse@")]
            return done if sum(r["status"] == "completed" for r in done) >= 4 else None

        done = wait_until(fired, timeout=30, message="four interval fires")
        assert all(r["attempts"] <= 1 for r in done)
        assert all(r["context"]["schedule"] == "pulse" for r in done)
        listed = json.loads(b.ys("schedule", "list", "--json").stdout)["schedules"]
        assert [(s["name"], s["every"], s["cron"]) for s in listed] == [("pulse", 1, None)]


def test_every_set_and_run_from_either_box(tmp_path, pg_url):
    a = home_on(tmp_path, pg_url, "a")
    b = home_on(tmp_path, pg_url, "b")
    with a, b:
        a.start()
        b.start()
        for bad in (["--every", "0"], ["--every", "1m", "--cron", "0 3 * * *"]):
            refused = a.ys("schedule", "add", "pulse", "hello", *bad)
            assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
        assert json.loads(b.ys("schedule", "list", "--json").stdout)["schedules"] == []
        added = a.ys("schedule", "add", "pulse", "hello", "--every", "1s", "--tz", "UTC")
        assert added.returncode == 0, added.stderr

        def fired() -> list[dict] | None:
            with b.client() as c:
                items = c.list(limit=1000)["executions"]
            done = [r for r in items if r["execution_id"].startswith("pulse@")]
            return done if sum(r["status"] == "completed" for r in done) >= 3 else None

        done = wait_until(fired, timeout=30, message="three interval fires")
        assert all(r["attempts"] <= 1 for r in done)
        changed = json.loads(b.ys("schedule", "set", "pulse", "--every", "1h", "--json").stdout)
        assert changed["every"] == 3600 and changed["cron"] is None
        (seen,) = json.loads(a.ys("schedule", "list", "--json").stdout)["schedules"]
        assert seen["every"] == 3600 and seen["next_fire_at"] == changed["next_fire_at"]
        run = json.loads(a.ys("schedule", "run", "pulse", "--json").stdout)["execution_id"]
        assert run.startswith("pulse@manual-")

        def ran() -> bool:
            with b.client() as c:
                return c.get(run)["status"] == "completed"

        wait_until(ran, timeout=30, message="the manual fire to run")
