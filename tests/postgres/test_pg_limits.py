"""Timeouts and force-kill across daemons on one PostgreSQL database (docs/design.md, "Workflow options"): the
daemon that runs a worker kills it when another box cancels the execution at once, and a
workflow's timeout fails it and kills its worker whichever daemon's sweep comes first. The
lease is long (120 s: the worker renews every 40 s) so that neither a lost lease nor a refused
renewal can be what kills the worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import (
    T0,
    DaemonHandle,
    alive,
    lines,
    make_home,
    prelude,
    wait_until,
    write_script,
)
from ys.errors import LeaseLost
from ys.values import StepWrite

BLOCKER = """
    @ys.workflow
    def main(step, params):
        step.run("work", block, params["dir"], "work")
"""

SLOW = """
    @ys.workflow(timeout=2)
    def main(step, params):
        step.run("work", block, params["dir"], "work")
"""


def _two(root: Path, url: str) -> tuple[DaemonHandle, DaemonHandle]:
    out = []
    for i in range(2):
        (root / f"box{i}").mkdir()
        h = make_home(root / f"box{i}", YS_DATABASE=url, YS_LEASE_SECONDS="120")
        write_script(h, "blocker", BLOCKER, prelude(start_pid=False))
        write_script(h, "slow", SLOW, prelude(start_pid=False))
        out.append(h)
    return out[0], out[1]


def _running_on(h: DaemonHandle, fx: Path, workflow: str) -> tuple[str, int]:
    with h.client() as c:
        eid = c.trigger(workflow, {"dir": str(fx)})["execution_id"]
    wait_until(lambda: "work:start" in lines(fx), message="the step to block")
    pid = wait_until(lambda: (h.worker_pids() or [None])[0], message="a worker")
    return eid, pid


def test_cancel_now_on_one_box_kills_the_worker_running_on_another(tmp_path, pg_url):
    fx = tmp_path / "fx"
    fx.mkdir()
    a, b = _two(tmp_path, pg_url)
    try:
        b.start()
        eid, pid = _running_on(b, fx, "blocker")
        a.start()
        done = a.ys("cancel", eid, "--now")
        assert done.returncode == 0, done.stderr
        wait_until(lambda: not alive(pid), timeout=15, message="b to kill its worker")
        with a.client() as c:
            assert c.get(eid)["status"] == "cancelled"
    finally:
        for h in (a, b):
            h.stop()


def test_a_timeout_fails_the_execution_and_kills_its_worker_across_daemons(tmp_path, pg_url):
    fx = tmp_path / "fx"
    fx.mkdir()
    a, b = _two(tmp_path, pg_url)
    try:
        b.start()
        eid, pid = _running_on(b, fx, "slow")
        a.start()  # its sweep may come first: b then hears of it and kills its worker
        with a.client() as c:
            record = c.wait(eid, timeout=30)
        assert record["outcome"]["error"]["name"] == "TimeoutError"
        wait_until(lambda: not alive(pid), timeout=15, message="the worker to be killed")
    finally:
        for h in (a, b):
            h.stop()


CRASHY = """
    @ys.workflow(max_attempts=3)
    def main(step, params):
        with open(os.path.join(params["dir"], "effects"), "a") as f:
            f.write(f"attempt {os.environ.get('YS_ATTEMPT')}\\n")
        os._exit(1)
"""


def test_max_attempts_counts_deliveries_that_died_on_any_daemon(tmp_path, pg_url):
    """Deliveries that end without an outcome are counted in the database, whichever daemon
    ran them (docs/design.md, "Workflow options"): the third fails the execution, and no daemon
    delivers it a fourth time."""
    fx = tmp_path / "fx"
    fx.mkdir()
    hs = []
    for i in range(2):
        (tmp_path / f"box{i}").mkdir()
        h = make_home(tmp_path / f"box{i}", YS_DATABASE=pg_url, YS_RETRY_BASE_SECONDS="0.1")
        write_script(h, "crashy", CRASHY, "import os\nimport ys\n")
        hs.append(h)
    try:
        for h in hs:
            h.start()
        with hs[0].client() as c:
            c.trigger("crashy", {"dir": str(fx)}, execution_id="crashy-1")
        with hs[1].client() as c:
            record = c.wait("crashy-1", timeout=120)
        assert record["status"] == "failed"
        assert record["outcome"]["error"]["name"] == "DeliveryAttemptsExhausted"
        assert lines(fx) == ["attempt 1", "attempt 2", "attempt 3"]
    finally:
        for h in hs:
            h.stop()


def test_a_lease_lost_on_one_daemon_counts_toward_max_attempts_on_another(daemons):
    """A daemon frozen past its delivery's lease: another daemon's claim sweeps the lease and
    counts it, so the cap holds across boxes whose deliveries die with them."""
    d0, d1 = daemons(2)
    d0.admit("job", {}, execution_id="frozen", now=T0)
    [lost] = d0.claim_due(now=T0, limit=1, lease_seconds=1)
    [d] = d1.claim_due(now=T0 + 5, limit=1, lease_seconds=30)  # sweeps d0's lease, counted
    assert d.attempt == 2
    assert d1.release(
        "frozen", d.token, retry_at=T0 + 6, reason="worker_failed", now=T0 + 6, max_attempts=2
    )
    assert d1.get("frozen").outcome["error"]["name"] == "DeliveryAttemptsExhausted"
    with pytest.raises(LeaseLost):  # the frozen delivery, woken, is fenced off
        d0.save_step("frozen", lost.token, "s", StepWrite("run", "completed", "1"))
