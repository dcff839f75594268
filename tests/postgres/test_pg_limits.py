"""Timeouts and force-kill across daemons on one PostgreSQL database (docs/design.md, "Workflow options"): the
daemon that runs a worker kills it when another box cancels the execution at once, and a
workflow's timeout fails it and kills its worker whichever daemon's sweep comes first. The
lease is long (120 s: the worker renews every 40 s) so that neither a lost lease nor a refused
renewal can be what kills the worker."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
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
    assert d1.get("frozen").outcome.error.name == "DeliveryAttemptsExhausted"
    with pytest.raises(LeaseLost):  # the frozen delivery, woken, is fenced off
        d0.save_step("frozen", lost.token, "s", StepWrite("run", "completed", "1"))


# -- limits and attempts that hold across boxes (docs/design.md, "Workflow options") ----------


def _query(url: str, sql: str, args: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sql, args).fetchall()]


def _stays(check: Callable[[], bool], seconds: float, message: str) -> None:
    """`check` holds each time it is looked at for `seconds` (a negative: nothing happens)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), message
        time.sleep(0.05)


def _boxes(root: Path, url: str, scripts: list[str], **env: str) -> list[DaemonHandle]:
    out = []
    for i, source in enumerate(scripts):
        (root / f"box{i}").mkdir()
        h = make_home(root / f"box{i}", YS_DATABASE=url, **env)
        write_script(h, "limited", source, prelude(start_pid=True))
        out.append(h)
    return out


def _status(h: DaemonHandle, eid: str) -> str:
    with h.client() as c:
        return str(c.get(eid)["status"])


LIMITED_AT = """
    @ys.workflow(concurrency={n})
    def main(step, params):
        step.run("work", block, params["dir"], params["label"])
"""


def test_two_boxes_with_different_copies_of_a_script_enforce_one_limit(tmp_path, pg_url):
    """Box 0's copy says concurrency=3, box 1's (started last: the newest recorded) says 1:
    both daemons' claims count against the one limit recorded with the script."""
    fx = tmp_path / "fx"
    fx.mkdir()
    scripts = [LIMITED_AT.format(n=3), LIMITED_AT.format(n=1)]
    a, b = _boxes(tmp_path, pg_url, scripts)
    try:
        a.start()
        wait_until(
            lambda: _query(pg_url, "SELECT concurrency FROM scripts") == [(3,)],
            message="box 0 to record its copy",
        )
        b.start()
        wait_until(
            lambda: _query(pg_url, "SELECT concurrency FROM scripts") == [(1,)],
            message="box 1 to record its copy",
        )
        for i in range(4):
            with (a if i % 2 else b).client() as c:
                c.trigger("limited", {"dir": str(fx), "label": f"n{i}"}, execution_id=f"n{i}")

        def waiting() -> int:
            with a.client() as c:
                return sum(1 for r in c.ps()["executions"] if r.get("waiting_for"))

        wait_until(
            lambda: (
                sum(ln.endswith(":start") or ":start:" in ln for ln in lines(fx)) == 1
                and waiting() == 3
            ),
            timeout=30,
            message="one running, three waiting for the one slot",
        )
        _stays(
            lambda: sum(":start" in ln for ln in lines(fx)) == 1,
            2,
            "box 0 started a second execution under its own copy's limit",
        )
        for i in range(4):
            (fx / f"n{i}.go").touch()
        with a.client() as c:
            assert {c.wait(f"n{i}", timeout=60)["status"] for i in range(4)} == {"completed"}
        # one at a time: each start follows the end of the one before
        order = [ln.split(":")[1] for ln in lines(fx)]
        assert order == ["start", "end"] * 4
    finally:
        for h in (a, b):
            h.stop()


def test_cancel_now_keeps_the_slot_until_the_old_worker_is_gone(tmp_path, pg_url):
    """Box 1 runs n1 and is frozen; box 0 cancels n1 at once. n1's worker still runs, so box 0
    does not start n2 of its group; once box 1 wakes, kills that worker and frees the slot,
    n2 starts."""
    fx = tmp_path / "fx"
    fx.mkdir()
    source = LIMITED_AT.format(n=1)
    a, b = _boxes(tmp_path, pg_url, [source, source], YS_LEASE_SECONDS="120")
    stopped = False
    try:
        b.start()
        with b.client() as c:
            c.trigger("limited", {"dir": str(fx), "label": "n1"}, execution_id="n1")
        wait_until(lambda: any(ln.startswith("n1:start") for ln in lines(fx)), message="n1")
        pid = int(next(ln for ln in lines(fx) if ln.startswith("n1:start")).rsplit(":", 1)[1])
        a.start()
        with a.client() as c:
            c.trigger("limited", {"dir": str(fx), "label": "n2"}, execution_id="n2")

        def n2_waits() -> bool:
            with a.client() as c:
                return any(
                    r["execution_id"] == "n2" and r.get("waiting_for") for r in c.ps()["executions"]
                )

        # the claims that saw n2 are over (a daemon frozen inside a write transaction would
        # hold up every other daemon's writes: another matter, docs/design.md "No wait on a
        # stopped client")
        wait_until(n2_waits, message="n2 waiting for the slot")
        assert b.proc is not None
        os.kill(b.proc.pid, signal.SIGSTOP)
        stopped = True
        done = a.ys("cancel", "n1", "--now")
        assert done.returncode == 0, done.stderr
        assert _status(a, "n1") == "cancelled"
        _stays(
            lambda: alive(pid) and _status(a, "n2") == "admitted",
            3,
            "n2 started while n1's worker still ran",
        )
        os.kill(b.proc.pid, signal.SIGCONT)
        stopped = False
        wait_until(lambda: not alive(pid), timeout=30, message="box 1 to kill n1's worker")
        wait_until(
            lambda: any(ln.startswith("n2:start") for ln in lines(fx)),
            timeout=30,
            message="n2 to start once the slot freed",
        )
        (fx / "n2.go").touch()
        with a.client() as c:
            assert c.wait("n2", timeout=60)["status"] == "completed"
    finally:
        if stopped and b.proc is not None:
            os.kill(b.proc.pid, signal.SIGCONT)
        for h in (a, b):
            h.stop()


FOREVER = """
    @ys.workflow(max_attempts=1)
    def main(step, params):
        step.run("work", block, params["dir"], "work")
"""


def test_a_lease_lost_by_a_frozen_daemon_counts_and_exhausts_max_attempts(tmp_path, pg_url):
    """max_attempts=1: box 1 runs it and is frozen past its lease; box 0's claim sweeps the
    lease, counts it and fails the execution, which is never delivered again; a `ys wait` on
    box 0 is told by that claim."""
    fx = tmp_path / "fx"
    fx.mkdir()
    a, b = _boxes(tmp_path, pg_url, [FOREVER, FOREVER], YS_LEASE_SECONDS="3")
    stopped = False
    try:
        b.start()
        with b.client() as c:
            c.trigger("limited", {"dir": str(fx)}, execution_id="frozen")
        wait_until(lambda: any(ln.startswith("work:start") for ln in lines(fx)), message="run")
        a.start()
        assert b.proc is not None
        os.kill(b.proc.pid, signal.SIGSTOP)
        stopped = True
        frozen_at = time.monotonic()
        with a.client() as c:
            record = c.wait("frozen", timeout=60)
        # told by box 0's claim that failed it (about the lease's 3 s), not when the long poll
        # gives up (30 s)
        assert time.monotonic() - frozen_at < 20
        assert record["status"] == "failed"
        assert record["outcome"]["error"]["name"] == "DeliveryAttemptsExhausted"
        assert sum(ln.startswith("work:start") for ln in lines(fx)) == 1  # never run again
    finally:
        if stopped and b.proc is not None:
            os.kill(b.proc.pid, signal.SIGCONT)
        for h in (a, b):
            h.stop()


STEP_TIMEOUT = """
    def slow(d):
        marker = os.path.join(d, "ran")
        if os.path.exists(marker):
            return "ran again"  # a second attempt would finish at once
        open(marker, "w").close()
        note(d, "slow:start")
        time.sleep(600)

    @ys.workflow
    def main(step, params):
        return step.run("slow", slow, params["dir"], timeout=2)
"""


def test_a_step_deadline_set_by_a_daemon_that_is_then_killed_still_fires(tmp_path, pg_url):
    """Box 1 runs a step with a 2 s timeout and is killed (SIGKILL) while the step runs: the
    deadline is in the database, so the sweep of its lease by box 0 records the attempt
    failed StepTimeout rather than running the step afresh."""
    fx = tmp_path / "fx"
    fx.mkdir()
    a, b = _boxes(tmp_path, pg_url, [STEP_TIMEOUT, STEP_TIMEOUT], YS_LEASE_SECONDS="4")
    try:
        b.start()
        with b.client() as c:
            c.trigger("limited", {"dir": str(fx)}, execution_id="stuck")
        wait_until(lambda: "slow:start" in lines(fx), message="the step to run")
        wait_until(
            lambda: (
                _query(pg_url, "SELECT step_deadline_at FROM executions WHERE execution_id='stuck'")
                != [(None,)]
            ),
            message="the step's deadline stored",
        )
        b.kill9()
        a.start()
        with a.client() as c:
            record = c.wait("stuck", timeout=60)
        assert record["status"] == "failed"
        assert record["outcome"]["error"]["name"] == "StepTimeout"
        assert lines(fx) == ["slow:start"]
    finally:
        for h in (a, b):
            h.stop()
