"""What `ys history` and `ys describe` show of a retried step, through a real daemon: times in
an event's data are ISO 8601 like every other time (for people and in --json), and each failed
attempt keeps its error, in the history and in describe, after a retry succeeds."""

from __future__ import annotations

import json
import re

import pytest
from e2e_support import fixture_dir, kinds, wait_until, write_workflow

from tests.support import DaemonHandle

pytestmark = pytest.mark.e2e

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TIMES = ("wake_at", "retry_at", "due_at")

RETRIED = """
def flaky(d):
    n = note(d, "attempt") and len(pathlib.Path(d, "effects").read_text().splitlines())
    if n < 3:
        raise ValueError("boom " + str(n))
    return "ok after " + str(n)

@ys.workflow
def main(step, params):
    if step.attempt == 1:
        os._exit(3)  # no outcome: released, with the time it is due again
    got = step.run("flaky", flaky, params["d"], retry=ys.Retry(max_attempts=3, interval=0.1))
    step.sleep("nap", 3600)  # `ys wake` requests a wake: an event with its due time
    return got
"""


def _json(daemon: DaemonHandle, *args: str) -> dict:
    done = daemon.ys(*args, "--json")
    assert done.returncode == 0, done.stderr
    out: dict = json.loads(done.stdout)
    return out


def test_history_shows_iso_times_and_describe_keeps_each_failed_attempts_error(
    daemon: DaemonHandle, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "retried", RETRIED)
    c = daemon.client()
    c.trigger("retried", {"d": str(fx)}, execution_id="retried-1")
    wait_until(
        lambda: (
            c.get("retried-1")["status"] == "suspended"
            and any(s["key"] == "nap" for s in c.describe("retried-1")["steps"])
        ),
        timeout=30,
        message="the retried step done and the nap begun",
    )
    assert daemon.ys("wake", "retried-1").returncode == 0
    wait_until(
        lambda: (
            kinds(c, "retried-1").count("claimed") == 5
            and c.get("retried-1")["status"] == "suspended"
        ),
        timeout=30,
        message="the woken delivery",
    )

    events = _json(daemon, "history", "retried-1")["events"]
    seen = {k for e in events for k in TIMES if k in e["data"]}
    assert seen == set(TIMES)  # each kind of time is there, and each is ISO 8601
    for e in events:
        for k in TIMES:
            if k in e["data"]:
                assert ISO.match(e["data"][k]), (k, e)
    failed = [e["data"] for e in events if e["kind"] == "step" and "error" in e["data"]]
    assert [(d["attempts"] if "attempts" in d else 1, d["error"]) for d in failed] == [
        (1, {"name": "ValueError", "message": "boom 1"}),
        (2, {"name": "ValueError", "message": "boom 2"}),
    ]

    people = daemon.ys("history", "retried-1")
    assert people.returncode == 0, people.stderr
    for e in events:
        for k in TIMES:
            if k in e["data"]:
                assert f'"{k}": "{e["data"][k]}"' in people.stdout, (k, people.stdout)
    assert not re.search(r'"(wake_at|retry_at|due_at)": \d', people.stdout)

    described = _json(daemon, "describe", "retried-1")
    flaky = next(s for s in described["steps"] if s["key"] == "flaky")
    assert (flaky["status"], flaky["attempts"], flaky["value"]) == ("completed", 3, "ok after 3")
    assert [(f["attempt"], f["error"]) for f in flaky["failed_attempts"]] == [
        (1, {"name": "ValueError", "message": "boom 1"}),
        (2, {"name": "ValueError", "message": "boom 2"}),
    ]
    assert all(ISO.match(f["at"]) for f in flaky["failed_attempts"])
    nap = next(s for s in described["steps"] if s["key"] == "nap")
    assert nap["failed_attempts"] == []

    shown = daemon.ys("describe", "retried-1")
    assert shown.returncode == 0, shown.stderr
    assert "Failed attempts" in shown.stdout
    assert "ValueError: boom 1" in shown.stdout and "ValueError: boom 2" in shown.stdout


DRIFTING = """
import uuid

@ys.workflow
def main(step, params):
    step.run("fetch-" + str(uuid.uuid4()), lambda: 1)  # a new key on every delivery
    step.sleep("nap", 0.2)
    step.sleep("nap-2", 0.2)
    return "done"
"""


def test_describe_shows_the_warnings_each_delivery_gave(daemon: DaemonHandle):
    """A step key that changes on every run warns in the delivery's log and in `describe`:
    on the delivery that ends suspended (sent with its waiting step) and on the last one."""
    write_workflow(daemon, "drifting", DRIFTING)
    c = daemon.client()
    c.trigger("drifting", {}, execution_id="drift-1")
    wait_until(lambda: c.get("drift-1")["status"] == "completed", timeout=30, message="completed")
    deliveries = _json(daemon, "describe", "drift-1")["deliveries"]
    assert [d["outcome"] for d in deliveries] == ["suspended", "suspended", "completed"]
    assert "warnings" not in deliveries[0]  # the first run has nothing recorded to miss
    for d in deliveries[1:]:
        (warning,) = d["warnings"]
        assert "non-deterministic step key" in warning and "'fetch-" in warning
    shown = daemon.ys("describe", "drift-1")
    assert shown.returncode == 0, shown.stderr
    assert "Warnings" in shown.stdout
    assert shown.stdout.count("non-deterministic step key") == 2
