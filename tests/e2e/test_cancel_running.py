"""`ys cancel` of a running execution whose worker does not come back to a step: after the
grace period (YS_CANCEL_GRACE_SECONDS) its process group is killed and it ends `cancelled`;
and a delivery of an execution whose cancellation an earlier delivery did not honour (its
worker was killed, its daemon died) runs no workflow code."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from e2e_support import (
    DaemonHandle,
    alive,
    claimed,
    fixture_dir,
    kinds,
    lines,
    make_home,
    wait_until,
)
from e2e_support import write_workflow as write

pytestmark = pytest.mark.e2e

LOOPER = """
@ys.workflow
def main(step, params):
    note(params["d"], "top")
    step.run("first", note, params["d"], "first")
    while True:  # never reaches another step
        time.sleep(0.02)
"""

BLOCKER = """
@ys.workflow
def main(step, params):
    note(params["d"], "top")
    step.run("work", block, params["d"], "work")
    step.run("after", note, params["d"], "after")
    return "finished"
"""

CLEANER = """
@ys.workflow
def main(step, params):
    try:
        step.run("work", block, params["d"], "work")
        step.run("after", note, params["d"], "after")
    except ys.WorkflowCancelledError:
        for i in range(6):  # each step well inside the grace period, all of them past it
            step.run(f"cleanup-{i}", lambda i=i: [time.sleep(0.8), note(params["d"], f"c{i}")])
        raise
    return "finished"
"""

PARENT = """
@ys.workflow
def main(step, params):
    step.start("child", "looper", params)
    while True:
        time.sleep(0.02)
"""


@pytest.fixture
def short_grace(tmp_path: Path) -> DaemonHandle:
    with make_home(tmp_path, YS_CANCEL_GRACE_SECONDS="1") as h:
        yield h.start()


@pytest.fixture
def grace_3s(tmp_path: Path) -> DaemonHandle:
    with make_home(tmp_path, YS_CANCEL_GRACE_SECONDS="3") as h:
        yield h.start()


@pytest.fixture
def long_grace(tmp_path: Path) -> DaemonHandle:
    """A grace period the tests never reach: whatever kills a worker here is the test."""
    with make_home(tmp_path, YS_CANCEL_GRACE_SECONDS="300") as h:
        yield h.start()


def _worker(d: DaemonHandle) -> int:
    return wait_until(lambda: (d.worker_pids() or [None])[0], message="a worker")


def test_a_worker_that_never_reaches_a_step_is_killed_after_the_grace_and_ends_cancelled(
    short_grace: DaemonHandle, tmp_path: Path
):
    fx = fixture_dir(tmp_path)
    write(short_grace, "looper", LOOPER)
    c = short_grace.client()
    eid = c.trigger("looper", {"d": str(fx)})["execution_id"]
    wait_until(lambda: "first" in lines(fx), message="the loop to start")
    pid = _worker(short_grace)
    assert c.cancel(eid)["changed"] is True

    record = c.wait(eid, timeout=30)
    assert record["status"] == "cancelled" and record["outcome"] == {"status": "cancelled"}
    assert kinds(c, eid)[-2:] == ["cancel_requested", "cancelled"]
    assert claimed(c, eid) == 1  # ended in its own delivery, not delivered again
    wait_until(lambda: not alive(pid), message="the worker to be killed")
    assert lines(fx) == ["top", "first"]


def test_a_shell_workflow_in_a_loop_without_steps_is_killed_and_ends_cancelled(
    short_grace: DaemonHandle, tmp_path: Path
):
    started = tmp_path / "started"
    short_grace.write(
        "spin", f"#!/bin/sh\ntouch {started}\nwhile true; do sleep 0.05; done\n", mode=0o700
    )
    c = short_grace.client()
    eid = c.trigger("spin")["execution_id"]
    wait_until(started.exists, message="the script to start")
    pid = _worker(short_grace)
    c.cancel(eid)
    assert c.wait(eid, timeout=30)["outcome"] == {"status": "cancelled"}
    wait_until(lambda: not alive(pid), message="the script to be killed")


def test_a_cancelled_parent_in_a_loop_takes_its_attached_running_child_with_it(
    short_grace: DaemonHandle, tmp_path: Path
):
    fx = fixture_dir(tmp_path)
    write(short_grace, "looper", LOOPER)
    write(short_grace, "parent", PARENT)
    c = short_grace.client()
    pid = c.trigger("parent", {"d": str(fx)})["execution_id"]
    wait_until(lambda: "first" in lines(fx), message="the child to loop")
    [child] = c.list(parent=pid)["executions"]
    assert child["status"] == "running"
    c.cancel(pid)
    assert c.wait(pid, timeout=30)["outcome"] == {"status": "cancelled"}
    assert c.wait(child["execution_id"], timeout=30)["outcome"] == {"status": "cancelled"}
    wait_until(lambda: not short_grace.worker_pids(), message="both workers to be gone")


def test_a_worker_killed_after_a_cancel_is_not_delivered_again_to_run_workflow_code(
    long_grace: DaemonHandle, tmp_path: Path
):
    fx = fixture_dir(tmp_path)
    write(long_grace, "blocker", BLOCKER)
    c = long_grace.client()
    eid = c.trigger("blocker", {"d": str(fx)})["execution_id"]
    wait_until(
        lambda: any(ln.startswith("work:start") for ln in lines(fx)), message="the step to block"
    )
    c.cancel(eid)
    os.killpg(_worker(long_grace), signal.SIGKILL)

    assert c.wait(eid, timeout=30)["outcome"] == {"status": "cancelled"}
    assert [ln.split(":")[0] for ln in lines(fx)] == ["top", "work"]  # no code ran again
    assert claimed(c, eid) == 1


def test_after_a_daemon_crash_a_pending_cancel_ends_the_execution_without_running_code(
    long_grace: DaemonHandle, tmp_path: Path
):
    fx = fixture_dir(tmp_path)
    write(long_grace, "blocker", BLOCKER)
    c = long_grace.client()
    eid = c.trigger("blocker", {"d": str(fx)})["execution_id"]
    wait_until(
        lambda: any(ln.startswith("work:start") for ln in lines(fx)), message="the step to block"
    )
    c.cancel(eid)
    long_grace.kill9()
    long_grace.start()  # recovery kills the old worker and releases its lease

    c = long_grace.client()
    assert c.wait(eid, timeout=30)["outcome"] == {"status": "cancelled"}
    history = kinds(c, eid)
    assert history[-3:] == ["released", "claimed", "cancelled"]
    assert [ln.split(":")[0] for ln in lines(fx)] == ["top", "work"]  # no code ran again


def test_each_step_saved_after_a_cancel_starts_the_grace_period_again(
    grace_3s: DaemonHandle, tmp_path: Path
):
    fx = fixture_dir(tmp_path)
    write(grace_3s, "cleaner", CLEANER)
    c = grace_3s.client()
    eid = c.trigger("cleaner", {"d": str(fx)})["execution_id"]
    wait_until(
        lambda: any(ln.startswith("work:start") for ln in lines(fx)), message="the step to block"
    )
    c.cancel(eid)
    (fx / "work.go").touch()
    assert c.wait(eid, timeout=30)["outcome"] == {"status": "cancelled"}
    assert [ln for ln in lines(fx) if ln.startswith("c")] == [f"c{i}" for i in range(6)]
    assert "after" not in lines(fx)
