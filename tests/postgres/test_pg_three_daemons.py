"""Three daemons (three homes, one PostgreSQL database), end to end: executions triggered on
any box complete once each, every finished step body ran once (the bodies count themselves in
a file), and 64 identical triggers spread over the three boxes make one execution."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support import (
    DaemonHandle,
    Threads,
    lines,
    make_home,
    prelude,
    wait_until,
    write_script,
)

THREE_STEPS = """
    @ys.workflow
    def main(step, params):
        for name in ("one", "two", "three"):
            step.run(name, note, params["dir"], params["id"] + ":" + name)
        return params["id"]
"""


def boxes(root: Path, url: str, n: int = 3) -> list[DaemonHandle]:
    out = []
    for i in range(n):
        (root / f"box{i}").mkdir()
        out.append(make_home(root / f"box{i}", YS_DATABASE=url))
    return out


@contextmanager
def on_boxes(
    root: Path, url: str, workflow: str, body: str, n: int = 3
) -> Iterator[tuple[Path, list[DaemonHandle]]]:
    """The test's side-effect folder and n boxes on the database `url`, each with the same
    workflow script (`body` after tests/support.py's prelude), not started; every daemon
    stopped afterwards."""
    fx = root / "fx"
    fx.mkdir()
    hs = boxes(root, url, n)
    try:
        for h in hs:  # the same workflows folder on each box
            write_script(h, workflow, body, prelude(start_pid=False))
        yield fx, hs
    finally:
        for h in hs:
            h.stop()


def gate_started(h: DaemonHandle, fx: Path, workflow: str, execution_id: str) -> None:
    """Start box h, trigger `workflow` there and wait until its gate step runs."""
    h.start()
    with h.client() as c:
        c.trigger(workflow, {"dir": str(fx)}, execution_id=execution_id)
    wait_until(
        lambda: lines(fx).count("gate:start") == 1, message=f"{execution_id}'s gate to start"
    )


def test_300_executions_on_three_daemons_each_complete_once(tmp_path, pg_url):
    with on_boxes(tmp_path, pg_url, "three", THREE_STEPS) as (fx, hs):
        for h in hs:
            h.start(concurrency=4)
        ids = [f"x{i:03}" for i in range(300)]

        def trigger(i: int) -> str:
            with hs[i % 3].client() as c:
                return str(
                    c.trigger("three", {"dir": str(fx), "id": ids[i]}, execution_id=ids[i])[
                        "execution_id"
                    ]
                )

        assert Threads(len(ids), trigger).results() == ids
        with hs[0].client() as c:
            for execution_id in ids:
                assert c.wait(execution_id, timeout=300)["status"] == "completed"
            ends = Counter(
                e["kind"]
                for i in ids
                for e in c.history(i, limit=100)["events"]
                if e["kind"] in ("completed", "failed", "cancelled")
            )
        assert ends == {"completed": 300}
        counts = Counter(lines(fx))
        assert set(counts) == {f"{i}:{s}" for i in ids for s in ("one", "two", "three")}
        assert set(counts.values()) == {1}, [k for k, v in counts.items() if v > 1][:10]
        holders = {json.loads(h.ys("daemon", "status", "--json").stdout)["daemon_id"] for h in hs}
        assert len(holders) == 3


def test_64_identical_triggers_over_three_daemons_make_one_execution(tmp_path, pg_url):
    with on_boxes(tmp_path, pg_url, "three", THREE_STEPS) as (fx, hs):
        for h in hs:
            h.start(concurrency=2)

        def trigger(i: int) -> dict:
            with hs[i % 3].client() as c:
                return dict(
                    c.trigger(
                        "three",
                        {"dir": str(fx), "id": "once"},
                        execution_id="once",
                        if_exists="use-existing",
                    )
                )

        results = Threads(64, trigger).results()
        assert all(isinstance(r, dict) for r in results), results
        assert sum(r["started"] for r in results) == 1
        with hs[1].client() as c:
            assert c.wait("once", timeout=60)["status"] == "completed"
            assert [r["execution_id"] for r in c.list()["executions"]] == ["once"]
        assert sorted(lines(fx)) == ["once:one", "once:three", "once:two"]


GATED = """
    @ys.workflow
    def main(step, params):
        step.run("gate", block, params["dir"], "gate")
        step.run("after", note, params["dir"], "after")
        return "done"
"""


def test_cancel_on_one_box_reaches_the_worker_on_another(tmp_path, pg_url):
    with on_boxes(tmp_path, pg_url, "gated", GATED, 2) as (fx, (a, b)):
        gate_started(a, fx, "gated", "g")
        b.start()
        cancelled = b.ys("cancel", "g", "--json")
        assert cancelled.returncode == 0, cancelled.stderr
        (fx / "gate.go").touch()
        with b.client() as c:
            assert c.wait("g", timeout=60)["status"] == "cancelled"
        assert "after" not in lines(fx)  # the next step raised WorkflowCancelledError


def test_a_daemon_stopped_past_its_lease_is_fenced_when_it_wakes(tmp_path, pg_url):
    with on_boxes(tmp_path, pg_url, "gated", GATED, 2) as (fx, (a, b)):
        gate_started(a, fx, "gated", "g")
        assert a.proc is not None
        os.kill(a.proc.pid, signal.SIGSTOP)  # a and its renewals stop; its lease runs out
        try:
            b.start()
            wait_until(
                lambda: lines(fx).count("gate:start") == 2,
                timeout=60,
                message="b to claim the expired lease and deliver again",
            )
            (fx / "gate.go").touch()
            with b.client() as c:
                assert c.wait("g", timeout=60)["status"] == "completed"
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        with a.client(timeout=30) as c:  # a wakes: its worker's writes are refused
            wait_until(lambda: c.get("g")["status"] == "completed", message="a to answer")
            kinds = [e["kind"] for e in c.history("g", limit=100)["events"]]
        assert kinds.count("completed") == 1 and kinds.count("claimed") == 2
        assert lines(fx).count("after") == 1
        wait_until(lambda: a.worker_pids() == [], message="a's stale worker to stop")


SLOW_STEPS = """
    def slow_note(d, line):
        # nothing runs before every trigger is in (the test then creates <d>/go), so that
        # the kills land while work is under way, however fast the boxes are
        while not os.path.exists(os.path.join(d, "go")):
            time.sleep(0.01)
        time.sleep(0.05)  # work that takes a while, so that kills land in the middle of it
        return note(d, line)

    @ys.workflow
    def main(step, params):
        for name in ("one", "two", "three"):
            step.run(name, slow_note, params["dir"], params["id"] + ":" + name)
        return params["id"]
"""


def test_a_daemon_killed_again_and_again_loses_nothing(tmp_path, pg_url):
    ids = [f"k{i:03}" for i in range(300)]
    with on_boxes(tmp_path, pg_url, "three", SLOW_STEPS) as (fx, hs):
        for h in hs:
            h.start(concurrency=4)
        for i, execution_id in enumerate(ids):
            with hs[i % 3].client() as c:
                c.trigger("three", {"dir": str(fx), "id": execution_id}, execution_id=execution_id)
        (fx / "go").touch()

        def completed() -> int:
            with hs[1].client() as c:
                return sum(1 for r in c.list(status=["completed"], limit=1000)["executions"])

        kills = 0
        while (done := completed()) < len(ids):
            # kill -9 box 0 each time 30 more have completed (a condition, not a clock)
            wait_until(
                lambda d=done: completed() >= min(len(ids), d + 30),
                timeout=120,
                message="more executions to complete",
            )
            if completed() < len(ids):
                hs[0].kill9()  # its workers live on, as after a real crash
                kills += 1
                hs[0].start(concurrency=4)  # kills those orphans, releases its own leases
        assert kills >= 2, kills
        with hs[2].client() as c:
            for execution_id in ids:
                events = c.history(execution_id, limit=1000)["events"]
                assert [e["kind"] for e in events].count("completed") == 1
                saved = Counter(
                    e["data"]["key"]
                    for e in events
                    if e["kind"] == "step" and e["data"]["status"] == "completed"
                )
                assert saved == {"one": 1, "two": 1, "three": 1}, (execution_id, saved)
        counts = Counter(lines(fx))
        assert set(counts) == {f"{i}:{s}" for i in ids for s in ("one", "two", "three")}
        # a step body runs again only when its daemon died before saving its result: at most
        # once per running delivery per kill
        assert sum(counts.values()) - len(counts) <= kills * 4


def test_ps_and_describe_on_any_box_name_the_daemon_that_holds_the_lease(tmp_path, pg_url):
    with on_boxes(tmp_path, pg_url, "gated", GATED, 2) as (fx, (a, b)):
        gate_started(a, fx, "gated", "g")
        b.start()
        ida = json.loads(a.ys("daemon", "status", "--json").stdout)["daemon_id"]
        (seen,) = json.loads(b.ys("ps", "--json").stdout)["executions"]
        assert seen["lease_holder"] == f"daemon {ida}, daemon pid {a.proc.pid}"
        described = json.loads(b.ys("describe", "g", "--json").stdout)
        assert described["lease_holder"] == seen["lease_holder"]
        (own,) = json.loads(a.ys("ps", "--json").stdout)["executions"]
        assert own["lease_holder"] == f"daemon {ida}, worker pid {a.worker_pids()[0]}"
        assert f"daemon {ida}" in b.ys("describe", "g").stdout
        (fx / "gate.go").touch()
        with b.client() as c:
            assert c.wait("g", timeout=60)["status"] == "completed"


WAITER = """
    @ys.workflow
    def main(step, params):
        approved = step.wait_for("approval", "approve/" + params["id"])
        step.run("after", note, params["dir"], "after:" + str(approved))
        return approved
"""


def test_a_wait_for_on_one_box_is_released_by_a_store_put_on_another(tmp_path, pg_url):
    with on_boxes(tmp_path, pg_url, "waiter", WAITER, 2) as (fx, (a, b)):
        a.start()
        with a.client() as c:
            c.trigger("waiter", {"dir": str(fx), "id": "7"}, execution_id="w")
            wait_until(lambda: c.get("w")["status"] == "suspended", message="w to wait on a")
        b.start()
        put = b.ys("store", "put", "approve/7", "true")
        assert put.returncode == 0, put.stderr
        with a.client() as c:
            record = c.wait("w", timeout=60)
        assert record["status"] == "completed", record
        assert lines(fx) == ["after:True"]


EVERY_SLOT = """
    @ys.workflow
    def main(step, params):
        step.run("fire", note, params["dir"], str(step.context["slot"]))
"""


def test_three_daemons_fire_each_slot_of_a_schedule_once(tmp_path, pg_url):
    """Ten slots fall due at once (the schedule's cursor is ten minutes back and it catches up
    every slot) while three daemons tick it: each slot is one execution, its step body run
    once, and no slot is missed. Slot IDs collapse duplicate fires; the claim of the schedule's
    cursor keeps two daemons from both admitting a slot."""
    import time

    from ys.contract import slot_id
    from ys.store import open_store

    with on_boxes(tmp_path, pg_url, "every", EVERY_SLOT) as (fx, hs):
        now = time.time()
        current = now - now % 60
        slots = [current - 60 * k for k in range(10, 0, -1)]  # ten missed minutes
        store = open_store(pg_url)
        try:
            store.schedule_add(
                "tick",
                "every",
                "* * * * *",
                tz="UTC",
                params={"dir": str(fx)},
                catch_up="all",
                overlap="allow",
                now=slots[0] - 30,
            )
        finally:
            store.close()
        for h in hs:
            h.start(concurrency=4)
        wanted = {slot_id("tick", s) for s in slots}

        def fired() -> set[str]:
            with hs[0].client() as c:
                items = c.list(workflow="every", limit=1000)["executions"]
            return {r["execution_id"] for r in items if r["status"] == "completed"}

        wait_until(lambda: wanted <= fired(), timeout=60, message="ten slots to complete")
        extra = fired() - wanted  # the current minute's slot may fire too, once
        assert extra <= {slot_id("tick", current), slot_id("tick", current + 60)}, extra
        counts = Counter(lines(fx))
        assert set(counts.values()) == {1}, counts
        assert len(counts) == len(wanted | extra)


CHATTY = """
    @ys.workflow
    def main(step, params):
        print("line one from", params["id"], flush=True)
        step.run("talk", lambda: print("inside the step", flush=True) or 1)
        print("the end", flush=True)
        return 1
"""


def test_logs_on_another_box_show_what_the_delivery_printed_and_where_its_log_is(tmp_path, pg_url):
    with on_boxes(tmp_path, pg_url, "chatty", CHATTY, 2) as (_, (a, b)):
        a.start()
        with a.client() as c:
            c.trigger("chatty", {"id": "c1"}, execution_id="c1")
            assert c.wait("c1", timeout=60)["status"] == "completed"
        b.start()
        ida = json.loads(a.ys("daemon", "status", "--json").stdout)["daemon_id"]
        printed = "line one from c1\ninside the step\nthe end\n"

        def kept() -> bool:  # kept just after the delivery's process ended
            with b.client() as c:
                return bool(c.log_tails("c1")["logs"])

        wait_until(kept, message="the end of c1's log in the database")
        here = a.ys("logs", "c1")
        assert here.returncode == 0 and here.stdout == printed, here.stderr
        assert "ran on daemon" not in here.stderr  # a's own file
        there = b.ys("logs", "c1")
        assert there.returncode == 0, there.stderr
        assert there.stdout == printed
        assert f"ran on daemon {ida}" in there.stderr and "1.log on that box" in there.stderr
        (entry,) = json.loads(b.ys("logs", "c1", "--json").stdout)["logs"]
        assert entry["attempt"] == 1 and entry["text"] == printed
        assert entry["daemon_id"] == ida and entry["truncated"] is False
        (one,) = json.loads(b.ys("logs", "c1", "--attempt", "1", "--json").stdout)["logs"]
        assert one == entry
        with b.client() as c:  # the route's attempt filter: only that delivery's
            assert c.log_tails("c1", attempt=2)["logs"] == []
            assert [t["attempt"] for t in c.log_tails("c1", attempt=1)["logs"]] == [1]


CHATTY_GATED = """
    @ys.workflow
    def main(step, params):
        print("before the gate", flush=True)
        step.run("gate", block, params["dir"], "gate")
        print("after the gate", flush=True)
        return 1
"""


def test_logs_follow_on_another_box_shows_the_end_of_a_delivery_once_it_ends(tmp_path, pg_url):
    import subprocess
    import sys

    with on_boxes(tmp_path, pg_url, "chatty", CHATTY_GATED, 2) as (fx, (a, b)):
        gate_started(a, fx, "chatty", "c2")
        b.start()
        ida = json.loads(a.ys("daemon", "status", "--json").stdout)["daemon_id"]
        running = b.ys("logs", "c2")
        assert running.returncode == 0, running.stderr
        assert f"attempt 1 runs on daemon {ida}" in running.stderr
        follower = subprocess.Popen(
            [sys.executable, "-m", "ys", "logs", "c2", "--follow"],
            env=b.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            (fx / "gate.go").touch()
            out, err = follower.communicate(timeout=60)
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.communicate()
        assert follower.returncode == 0, err
        assert out == "before the gate\nafter the gate\n"
        assert f"ran on daemon {ida}" in err


def test_logs_name_an_attempt_whose_daemon_was_killed_and_kept_no_tail(tmp_path, pg_url):
    """Box a is killed while it runs attempt 1 (no end of its log reaches the database); box
    b runs attempt 2. `ys logs` on b names attempt 1, the daemon that ran it, and that no end
    of its log was kept, instead of leaving it out."""
    with on_boxes(tmp_path, pg_url, "chatty", CHATTY_GATED, 2) as (fx, (a, b)):
        gate_started(a, fx, "chatty", "c3")
        ida = json.loads(a.ys("daemon", "status", "--json").stdout)["daemon_id"]
        a.kill9()
        a.kill_workers()
        (fx / "gate.go").touch()
        b.start()
        with b.client() as c:
            assert c.wait("c3", timeout=60)["status"] == "completed"
            assert c.get("c3")["attempts"] == 2
        shown = b.ys("logs", "c3")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.endswith("before the gate\nafter the gate\n")
        assert f"attempt 1 ran on daemon {ida}" in shown.stderr, shown.stderr
        assert "no end of its log was kept" in shown.stderr, shown.stderr
        first, second = json.loads(b.ys("logs", "c3", "--json").stdout)["logs"]
        assert first["attempt"] == 1 and first["lost"] is True and first["text"] == ""
        assert first["daemon_id"] == ida
        assert second["attempt"] == 2 and second["text"] == "before the gate\nafter the gate\n"
