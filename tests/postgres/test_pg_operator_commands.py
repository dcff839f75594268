"""Operator commands on a shared PostgreSQL database, across two boxes: `ys trigger --in`
admits an execution due later that any box sees due and wakes; `ys cancel --status ...` on
one box cancels the matches another box runs or holds; `ys trigger --at` is claimed by any box
when due, never before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import DaemonHandle, make_home, wait_until
from ys.errors import NotFound

NAP = """
    import ys

    @ys.workflow
    def main(step, params):
        step.sleep("nap", 3600)
        return "rested"
"""

HELLO = """
    import ys

    @ys.workflow
    def main(step, params):
        return step.run("greet", lambda: "hello")
"""


def _box(root: Path, url: str, name: str) -> DaemonHandle:
    (root / name).mkdir()
    h = make_home(root / name, YS_DATABASE=url)
    h.write("nap.py", NAP)
    h.write("hello.py", HELLO)
    return h


def _status(h: DaemonHandle, execution_id: str) -> str:
    with h.client() as c:
        status: str = c.get(execution_id)["status"]
    return status


def test_due_later_and_cancel_by_status_across_boxes(tmp_path, pg_url):
    a, b = _box(tmp_path, pg_url, "a"), _box(tmp_path, pg_url, "b")
    with a, b:
        a.start(concurrency=2)
        b.start(concurrency=2)
        assert a.ys("trigger", "hello", "--id", "later", "--in", "1h").returncode == 0
        for execution_id in ("nap-1", "nap-2"):
            assert a.ys("trigger", "nap", "--id", execution_id).returncode == 0
        for execution_id in ("nap-1", "nap-2"):
            wait_until(lambda i=execution_id: _status(b, i) == "suspended", message=execution_id)
        # the other box sees it due later, and no box claimed it
        ps = json.loads(b.ys("ps", "--json").stdout)
        [later] = [r for r in ps["executions"] if r["execution_id"] == "later"]
        assert later["status"] == "admitted" and later["attempts"] == 0
        assert later["due_at"] is not None

        cancelled = b.ys("cancel", "--status", "suspended", "--workflow", "nap", "--json")
        assert cancelled.returncode == 0, cancelled.stderr
        assert json.loads(cancelled.stdout) == {"cancelled": ["nap-2", "nap-1"]}
        for execution_id in ("nap-1", "nap-2"):
            wait_until(lambda i=execution_id: _status(a, i) == "cancelled", message=execution_id)
        assert _status(a, "later") == "admitted"  # not a match: left due later

        assert b.ys("wake", "later").returncode == 0
        wait_until(lambda: _status(a, "later") == "completed", message="later completed")


def test_trigger_at_is_run_when_due_by_any_box(tmp_path, pg_url):
    """`ys trigger --at` on a shared database: the admission is due then, and whichever box
    claims it claims it no sooner; an `--at` in no known format admits nothing."""
    import datetime as dt
    import time

    a, b = _box(tmp_path, pg_url, "a"), _box(tmp_path, pg_url, "b")
    with a, b:
        a.start()
        b.start()
        when = dt.datetime.fromtimestamp(time.time() + 3, tz=dt.UTC)
        result = a.ys("trigger", "hello", "--id", "at-1", "--at", when.isoformat(), "--json")
        assert result.returncode == 0, result.stderr
        with b.client() as c:  # the other box reads it due then
            due_at = c.get("at-1")["due_at"]
        shown = dt.datetime.fromisoformat(due_at.replace("Z", "+00:00"))
        assert abs((shown - when).total_seconds()) < 0.001
        wait_until(lambda: _status(b, "at-1") == "completed", message="at-1 completed")
        with a.client() as c:
            events = c.history("at-1")["events"]
        admitted, claimed = events[0], next(e for e in events if e["kind"] == "claimed")
        assert admitted["data"]["due_at"] == due_at
        assert admitted["at"] < due_at <= claimed["at"]  # ISO UTC times compare as text

        bad = b.ys("trigger", "hello", "--id", "at-2", "--at", "next tuesday")
        assert bad.returncode == 2, bad.stderr
        assert "is not an ISO 8601 time" in bad.stderr and len(bad.stderr.splitlines()) == 1
        with a.client() as c, pytest.raises(NotFound):
            c.get("at-2")
