"""Survival: the daemon or a worker dies, stops or is told to stop, and every execution still
completes with no finished step run again."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from e2e_support import (
    alive,
    count,
    events,
    fixture_dir,
    go,
    kinds,
    lines,
    parse_iso,
    wait_until,
    write_workflow,
)

import ys
from ys.client import Transport

pytestmark = pytest.mark.e2e

GRACE = 2.0  # YS_GRACE_SECONDS in the fixture
LEASE = 3.0  # YS_LEASE_SECONDS in the fixture

THREE_STEPS = """
@ys.workflow
def main(step, params):
    d = params["d"]
    step.run("one", note, d, "one")
    step.run("two", block, d, "two")
    step.run("three", note, d, "three")
    return "done"
"""


def _start_pids(fx, name: str) -> list[int]:
    return [int(ln.rsplit(":", 1)[1]) for ln in lines(fx) if ln.startswith(f"{name}:start:")]


def test_daemon_killed_with_sigkill_recovers_admitted_running_and_suspended_executions(
    ys_home, tmp_path
):
    # One slot: the running execution holds it, so the third one stays admitted at the kill.
    daemon = ys_home.start(concurrency=1)
    fx = fixture_dir(tmp_path)
    write_workflow(
        daemon,
        "napper",
        """
        @ys.workflow
        def main(step, params):
            d = params["d"]
            step.run("c1", note, d, "c1")
            step.sleep("nap", 2)
            step.run("c2", note, d, "c2")
            return "rested"
    """,
    )
    write_workflow(
        daemon,
        "worker",
        """
        @ys.workflow
        def main(step, params):
            d = params["d"]
            step.run("b1", note, d, "b1")
            step.run("b2", block, d, "b2")
            step.run("b3", note, d, "b3")
            return "worked"
    """,
    )
    write_workflow(
        daemon,
        "queued",
        """
        @ys.workflow
        def main(step, params):
            d = params["d"]
            step.run("a1", note, d, "a1")
            step.run("a2", note, d, "a2")
            return "queued"
    """,
    )
    c = daemon.client()
    p = {"d": str(fx)}
    c.trigger("napper", p, execution_id="suspended-1")
    wait_until(lambda: c.get("suspended-1")["status"] == "suspended", message="suspended")
    c.trigger("worker", p, execution_id="running-1")
    wait_until(lambda: count(fx, "b2:start") == 1, message="b2 blocked in its step")
    c.trigger("queued", p, execution_id="admitted-1")
    assert c.get("admitted-1")["status"] == "admitted"
    assert c.get("running-1")["status"] == "running"
    assert c.get("suspended-1")["status"] == "suspended"
    [orphan] = daemon.worker_pids()
    assert _start_pids(fx, "b2") == [orphan]

    daemon.kill9()
    daemon.start()
    # the orphan ended itself when its daemon died, or recovery killed it: either way it was
    # gone before the new daemon answered
    assert not alive(orphan)

    wait_until(lambda: count(fx, "b2:start") == 2, message="b2 delivered again")
    again = _start_pids(fx, "b2")[1]
    assert again != orphan
    go(fx, "b2")
    c = daemon.client()
    for execution_id, result in (
        ("admitted-1", "queued"),
        ("running-1", "worked"),
        ("suspended-1", "rested"),
    ):
        record = c.wait(execution_id, timeout=30)
        assert record["outcome"] == {"status": "completed", "result": result}, execution_id

    # every finished step ran exactly once; the step running at the kill ran exactly twice,
    # and finished once (the orphan never got to finish it beside the new delivery)
    for name in ("a1", "a2", "b1", "b3", "c1", "c2"):
        assert lines(fx).count(name) == 1, (name, lines(fx))
    assert count(fx, "b2:start") == 2
    assert lines(fx).count("b2:end") == 1
    released = [e["data"] for e in events(c, "running-1") if e["kind"] == "released"]
    assert [r["reason"] for r in released] == ["daemon_restarted"]
    assert c.get("running-1")["attempts"] == 2


def test_worker_killed_with_sigkill_mid_step_is_redelivered_without_repeating_earlier_steps(
    daemon, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "three", THREE_STEPS)
    c = daemon.client()
    c.trigger("three", {"d": str(fx)}, execution_id="three-1")
    wait_until(lambda: count(fx, "two:start") == 1, message="step two blocked")
    [pid] = daemon.worker_pids()
    assert _start_pids(fx, "two") == [pid]
    os.kill(pid, signal.SIGKILL)

    wait_until(lambda: count(fx, "two:start") == 2, message="redelivered")
    go(fx, "two")
    record = c.wait("three-1", timeout=20)
    assert record["outcome"] == {"status": "completed", "result": "done"}
    assert record["attempts"] == 2
    assert lines(fx).count("one") == 1
    assert lines(fx).count("three") == 1
    assert lines(fx).count("two:end") == 1
    released = [e["data"] for e in events(c, "three-1") if e["kind"] == "released"]
    assert len(released) == 1 and released[0]["reason"] == "worker_failed"
    assert "status -9" in released[0]["detail"]


def test_worker_stopped_past_its_lease_is_killed_redelivered_and_its_old_token_is_refused(
    daemon, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(
        daemon,
        "fenced",
        """
        def remember_token(d):
            note(d, "token:" + os.environ["YS_DELIVERY_TOKEN"])

        @ys.workflow
        def main(step, params):
            d = params["d"]
            step.run("one", note, d, "one")
            remember_token(d)  # outside a step on purpose: once per delivery
            step.run("two", block, d, "two")
            return "done"
    """,
    )
    c = daemon.client()
    c.trigger("fenced", {"d": str(fx)}, execution_id="fenced-1")
    wait_until(lambda: count(fx, "two:start") == 1, message="step two blocked")
    [pid] = daemon.worker_pids()
    tokens = [ln.split(":", 1)[1] for ln in lines(fx) if ln.startswith("token:")]
    old = tokens[0]
    os.kill(pid, signal.SIGSTOP)
    try:
        # the stopped worker cannot renew; after its 3 s lease the dispatcher kills it
        wait_until(lambda: not alive(pid), timeout=20, message="the stopped worker killed")
        wait_until(lambda: count(fx, "two:start") == 2, timeout=20, message="redelivered")
        new = [ln.split(":", 1)[1] for ln in lines(fx) if ln.startswith("token:")][1]
        assert new != old

        base = "/v1/executions/fenced-1"
        late = Transport(str(daemon.socket), token=old)
        with pytest.raises(ys.LeaseLost) as refused:
            late.request(
                "PUT", f"{base}/steps/x", {"kind": "run", "status": "completed", "value": "1"}
            )
        assert refused.value.code == "LEASE_LOST"
        assert refused.value.context.get("status") == 409
        with pytest.raises(ys.LeaseLost):
            late.request(
                "POST", f"{base}/outcome", {"outcome": {"status": "completed", "result": "forged"}}
            )
        with pytest.raises(ys.LeaseLost):
            late.request("POST", f"{base}/lease", {})
        late.close()

        # the new delivery keeps its lease by renewing: it is still running (and renewing)
        # after its first lease would have run out, not killed along with the old one
        second_claim = parse_iso(
            [e for e in events(c, "fenced-1") if e["kind"] == "claimed"][-1]["at"]
        )
        wait_until(
            lambda: (
                parse_iso(c.describe("fenced-1")["lease_expires_at"])
                >= second_claim + 2 * LEASE + 0.5
            ),
            timeout=15,
            message="the redelivered worker renewing past its first lease",
        )
        assert alive(_start_pids(fx, "two")[1])

        go(fx, "two")
        record = c.wait("fenced-1", timeout=20)
        assert record["outcome"] == {"status": "completed", "result": "done"}
        assert "x" not in {s["key"] for s in c.describe("fenced-1")["steps"]}
        assert lines(fx).count("one") == 1
        assert lines(fx).count("two:end") == 1
        released = [e["data"] for e in events(c, "fenced-1") if e["kind"] == "released"]
        assert len(released) == 1
        assert released[0]["reason"] in ("lease_expired", "lease_lost")
    finally:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def test_sigterm_with_a_running_delivery_stops_within_grace_and_redelivers_after_restart(
    daemon, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "three", THREE_STEPS)
    c = daemon.client()
    c.trigger("three", {"d": str(fx)}, execution_id="three-1")
    wait_until(lambda: count(fx, "two:start") == 1, message="step two blocked")
    [pid] = daemon.worker_pids()

    assert daemon.proc is not None
    t0 = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    try:
        code = daemon.proc.wait(timeout=GRACE + 10)
    except subprocess.TimeoutExpired:
        pytest.fail("the daemon did not stop after SIGTERM")
    stopped_after = time.monotonic() - t0
    assert code == 0
    assert stopped_after < GRACE + 5  # the grace period, plus the kill and the release
    assert not alive(pid)  # the delivery was killed, not left behind
    assert not daemon.socket.exists()

    daemon.start()
    c = daemon.client()
    wait_until(lambda: count(fx, "two:start") == 2, message="delivered again after restart")
    go(fx, "two")
    record = c.wait("three-1", timeout=20)
    assert record["outcome"] == {"status": "completed", "result": "done"}
    assert lines(fx).count("one") == 1
    assert lines(fx).count("two:end") == 1
    ks = kinds(c, "three-1")
    assert ks.count("claimed") == 2 and ks.count("released") == 1
