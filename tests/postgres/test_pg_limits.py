"""Timeouts and force-kill across daemons on one PostgreSQL database (docs/design.md, "Workflow options"): the
daemon that runs a worker kills it when another box cancels the execution at once, and a
workflow's timeout fails it and kills its worker whichever daemon's sweep comes first. The
lease is long (120 s: the worker renews every 40 s) so that neither a lost lease nor a refused
renewal can be what kills the worker."""

from __future__ import annotations

from pathlib import Path

from tests.support import DaemonHandle, alive, lines, make_home, prelude, wait_until, write_script

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
