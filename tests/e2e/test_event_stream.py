"""`ys history --follow --all --json` through a real daemon: every event of every execution
arrives once, in commit order, as JSON lines, across a daemon killed and started again; a
cursor resumes after its event; without one the stream follows from now, and without
--follow every event so far is printed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support import DaemonHandle, make_home, rows, wait_until

TICK = """
    import ys

    @ys.workflow
    def main(step, params):
        return step.run("one", lambda: params["n"])
"""


def stream_lines(path) -> list[dict]:
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def run_all(h: DaemonHandle, n: int, first: int) -> list[str]:
    with h.client() as c:
        ids = [
            c.trigger("tick", {"n": i}, execution_id=f"t-{i:03d}")["execution_id"]
            for i in range(first, first + n)
        ]
        for i in ids:
            assert c.wait(i, timeout=60)["status"] == "completed"
    return ids


@pytest.fixture
def home(tmp_path) -> Iterator[DaemonHandle]:
    with make_home(tmp_path) as h:
        h.write("tick.py", TICK)
        yield h.start()


def test_every_event_of_100_executions_arrives_once_in_commit_order_across_a_restart(
    home, tmp_path
):
    out = tmp_path / "stream.jsonl"
    with open(out, "wb") as sink:
        follower = subprocess.Popen(
            [sys.executable, "-m", "ys", "history", "--follow", "--all", "--json", "--cursor", "0"],
            env=home.env,
            stdout=sink,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    try:
        ids = run_all(home, 50, 0)
        home.kill9()  # the follower's daemon goes away mid-stream
        home.start()
        ids += run_all(home, 50, 50)
        committed = rows(home.db, "SELECT l.execution_id, l.seq FROM event_log l ORDER BY l.pos")
        wait_until(
            lambda: len(stream_lines(out)) >= len(committed),
            timeout=60,
            message=f"{len(committed)} events streamed",
        )
        got = stream_lines(out)
        assert [(e["execution_id"], e["seq"]) for e in got] == [tuple(r) for r in committed]
        cursors = [int(e["cursor"]) for e in got]
        assert cursors == sorted(set(cursors))  # strictly increasing: commit order, no repeat
        assert {e["execution_id"] for e in got} == set(ids)
        with home.client() as c:
            for i in (ids[0], ids[-1]):
                history = c.history(i, limit=1000)["events"]
                assert [(e["seq"], e["kind"]) for e in got if e["execution_id"] == i] == [
                    (e["seq"], e["kind"]) for e in history
                ]
        assert all(e["workflow"] == "tick" for e in got)
    finally:
        os.killpg(follower.pid, signal.SIGKILL)
        follower.wait(timeout=10)
        assert follower.stderr is not None
        follower.stderr.close()


def test_a_cursor_resumes_after_its_event_and_without_follow_every_event_is_printed(home):
    run_all(home, 3, 0)
    everything = home.ys("history", "--all", "--json", "--since", "1h")
    assert everything.returncode == 0, everything.stderr
    events = [json.loads(line) for line in everything.stdout.splitlines()]
    assert len(events) == sum(1 for _ in rows(home.db, "SELECT 1 FROM events"))
    middle = events[len(events) // 2]["cursor"]
    rest = home.ys("history", "--all", "--json", "--cursor", middle)
    assert [json.loads(line) for line in rest.stdout.splitlines()] == events[len(events) // 2 + 1 :]
    # without --follow, --since or --cursor: every event so far, as `ys history ID` for one
    so_far = home.ys("history", "--all", "--json")
    assert so_far.returncode == 0, so_far.stderr
    assert [json.loads(line) for line in so_far.stdout.splitlines()] == events
    people = home.ys("history", "--all")
    assert people.returncode == 0 and len(people.stdout.splitlines()) == len(events)
    bad = home.ys("history", "--all", "--cursor", "x")
    assert bad.returncode == 2 and "cursor" in bad.stderr
