"""Hard timeouts, attempt caps and force-kill through a real daemon (docs/design.md, "Workflow options"):
`@ys.workflow(timeout=)` fails an execution that runs, or waits, too long and kills its worker
with what it spawned; `step.run(timeout=)` and `ys step run KEY --timeout` kill one attempt
and record it failed with StepTimeout, retried by its policy; `max_attempts` caps deliveries
that end without an outcome, and daemon crashes do not count; `ys cancel --now` kills at once;
a bad option in a script is that script's load error."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from e2e_support import (
    DaemonHandle,
    alive,
    claimed,
    events,
    fixture_dir,
    lines,
    make_home,
    wait_until,
)
from e2e_support import write_workflow as write

pytestmark = pytest.mark.e2e

SPAWNER = """
import subprocess

def hang(d):
    child = subprocess.Popen(["sleep", "1000"])
    note(d, f"pids {os.getpid()} {child.pid}")
    while True:
        time.sleep(0.05)

@ys.workflow(timeout=2)
def main(step, params):
    step.run("hang", hang, params["d"])
"""


def _pids(fx: Path) -> list[int]:
    found = [ln for ln in lines(fx) if ln.startswith("pids ")]
    return [int(p) for p in found[0].split()[1:]] if found else []


def test_a_workflow_past_its_timeout_fails_and_its_worker_and_child_are_killed(
    daemon: DaemonHandle, tmp_path: Path
):
    fx = fixture_dir(tmp_path)
    write(daemon, "spawner", SPAWNER)
    c = daemon.client()
    t0 = time.monotonic()
    eid = c.trigger("spawner", {"d": str(fx)})["execution_id"]
    worker, child = wait_until(lambda: _pids(fx), message="the step to spawn its child")
    record = c.wait(eid, timeout=30)
    elapsed = time.monotonic() - t0
    assert record["status"] == "failed"
    assert record["outcome"]["error"]["name"] == "TimeoutError"
    assert "2 s" in record["outcome"]["error"]["message"]
    assert 1.9 <= elapsed <= 5.0, elapsed  # the bound: 2-4 s, generously
    wait_until(lambda: not alive(worker) and not alive(child), message="both to be killed")
    assert claimed(c, eid) == 1


def test_a_suspended_execution_past_its_timeout_fails_without_a_delivery(
    daemon: DaemonHandle,
):
    write(
        daemon,
        "napper",
        """
        @ys.workflow(timeout=2)
        def main(step, params):
            step.sleep("nap", 3600)
        """,
    )
    c = daemon.client()
    eid = c.trigger("napper")["execution_id"]
    wait_until(lambda: c.get(eid)["status"] == "suspended", message="the sleep")
    record = c.wait(eid, timeout=30)
    assert record["outcome"]["error"]["name"] == "TimeoutError"
    assert claimed(c, eid) == 1  # failed by the daemon, not by a delivery


def test_a_deadline_is_kept_while_the_daemon_runs_at_its_concurrency_ceiling(
    tmp_path: Path,
):
    """With every slot busy nothing can be claimed, but an admitted execution past its
    deadline still fails on time (the dispatcher wakes at the next deadline, not in 30 s)."""
    fx = fixture_dir(tmp_path)
    (tmp_path / "home").mkdir()
    with make_home(tmp_path / "home") as h:
        write(
            h,
            "busy",
            """
            @ys.workflow
            def main(step, params):
                step.run("gate", block, params["d"], "gate")
            """,
        )
        write(
            h,
            "late",
            """
            @ys.workflow(timeout=1)
            def main(step, params):
                return 1
            """,
        )
        h.start(concurrency=1)
        c = h.client()
        busy = c.trigger("busy", {"d": str(fx)})["execution_id"]
        wait_until(
            lambda: any(ln.startswith("gate:start") for ln in lines(fx)),
            message="the one slot to be taken",
        )
        t0 = time.monotonic()
        late = c.trigger("late")["execution_id"]
        record = c.wait(late, timeout=25)
        assert record["status"] == "failed", record
        assert record["outcome"]["error"]["name"] == "TimeoutError"
        assert time.monotonic() - t0 < 10  # not the dispatcher's 30 s idle look
        assert claimed(c, late) == 0  # never delivered: the slot stayed busy
        (fx / "gate.go").touch()
        assert c.wait(busy, timeout=30)["status"] == "completed"


def test_a_hanging_step_with_a_timeout_is_killed_retried_and_fails_with_step_timeout(
    daemon: DaemonHandle, tmp_path: Path
):
    fx = fixture_dir(tmp_path)
    write(
        daemon,
        "stuck",
        """
        def hang(d):
            note(d, "attempt")
            while True:
                time.sleep(0.05)

        @ys.workflow
        def main(step, params):
            try:
                step.run("hang", hang, params["d"], timeout=1,
                         retry=ys.Retry(max_attempts=2, interval=0.1))
            except ys.StepTimeout:
                note(params["d"], "caught")
                raise
        """,
    )
    c = daemon.client()
    eid = c.trigger("stuck", {"d": str(fx)})["execution_id"]
    record = c.wait(eid, timeout=60)
    assert record["status"] == "failed"
    assert record["outcome"]["error"]["name"] == "StepTimeout"
    assert lines(fx) == ["attempt", "attempt", "caught"]
    saved = [e for e in events(c, eid) if e["kind"] == "step"]
    assert [e["data"].get("error", {}).get("name") for e in saved] == ["StepTimeout"] * 2
    releases = [e["data"]["reason"] for e in events(c, eid) if e["kind"] == "released"]
    assert releases == ["step_timeout", "step_timeout"]  # not counted toward max_attempts


def test_a_shell_step_with_a_timeout_is_killed_and_recorded_failed(
    daemon: DaemonHandle, tmp_path: Path
):
    ran = tmp_path / "ran"
    daemon.write(
        "slowsh",
        f"#!/bin/sh\nset -e\necho x >> {ran}\nys step run wait --timeout 1 -- sleep 1000\n"
        "echo never\n",
        mode=0o700,
    )
    c = daemon.client()
    eid = c.trigger("slowsh")["execution_id"]
    record = c.wait(eid, timeout=60)
    assert record["status"] == "failed"
    assert "124" in record["outcome"]["error"]["message"]  # the replayed step exits 124
    [step] = [e for e in events(c, eid) if e["kind"] == "step"]
    assert step["data"]["status"] == "failed"
    assert step["data"]["error"]["name"] == "StepTimeout"
    assert ran.read_text().count("x") == 2  # killed once, then replayed


def test_a_workflow_that_crashes_at_its_first_step_fails_after_max_attempts(
    daemon: DaemonHandle,
):
    write(
        daemon,
        "crasher",
        """
        @ys.workflow(max_attempts=3)
        def main(step, params):
            print("about to crash", flush=True)
            step.run("boom", lambda: os._exit(9))
        """,
    )
    c = daemon.client()
    eid = c.trigger("crasher")["execution_id"]
    record = c.wait(eid, timeout=60)
    assert record["status"] == "failed"
    error = record["outcome"]["error"]
    assert error["name"] == "DeliveryAttemptsExhausted"
    assert "about to crash" in error["message"]  # the last log tail
    assert claimed(c, eid) == 3


def test_daemon_crashes_and_stops_during_a_delivery_do_not_exhaust_its_attempts(tmp_path: Path):
    fx = fixture_dir(tmp_path)
    with make_home(tmp_path) as d:
        d.start()
        write(
            d,
            "patient",
            """
            @ys.workflow(max_attempts=2)
            def main(step, params):
                step.run("work", block, params["d"], "work")
                return "done"
            """,
        )
        c = d.client()
        eid = c.trigger("patient", {"d": str(fx)})["execution_id"]
        for n in range(1, 8):
            wait_until(
                lambda n=n: sum(ln.startswith("work:start") for ln in lines(fx)) >= n,
                message=f"delivery {n} to block",
            )
            if n <= 5:
                d.kill9()  # recovery at the next start kills the worker and releases its lease
            else:
                d.stop()  # a graceful stop: the worker is killed after the grace period
            d.start()
        wait_until(
            lambda: sum(ln.startswith("work:start") for ln in lines(fx)) >= 8,
            message="the delivery after the last crash",
        )
        (fx / "work.go").touch()
        c = d.client()
        record = c.wait(eid, timeout=60)
        assert record["status"] == "completed", record
        assert claimed(c, eid) == 8
        reasons = [e["data"]["reason"] for e in events(c, eid) if e["kind"] == "released"]
        assert reasons == ["daemon_restarted"] * 5 + ["daemon_stopped"] * 2


def test_cancel_now_kills_a_running_worker_at_once_and_ends_it_cancelled(tmp_path: Path):
    fx = fixture_dir(tmp_path)
    with make_home(tmp_path, YS_CANCEL_GRACE_SECONDS="300") as d:
        d.start()
        write(
            d,
            "blocker",
            """
            @ys.workflow
            def main(step, params):
                step.run("work", block, params["d"], "work")
            """,
        )
        c = d.client()
        eid = c.trigger("blocker", {"d": str(fx)})["execution_id"]
        wait_until(lambda: any(ln.startswith("work:start") for ln in lines(fx)), message="block")
        pid = wait_until(lambda: (d.worker_pids() or [None])[0], message="a worker")
        done = d.ys("cancel", eid, "--now")
        assert done.returncode == 0, done.stderr
        assert c.get(eid)["status"] == "cancelled"  # ended by the command itself
        wait_until(lambda: not alive(pid), timeout=10, message="the worker to be killed at once")
        assert claimed(c, eid) == 1
        assert not any(ln.startswith("work:end") for ln in lines(fx))


def _listed(daemon: DaemonHandle, *names: str) -> dict[str, dict]:
    """`ys workflows` once the registry lists every one of `names`."""
    c = daemon.client()

    def listing() -> dict[str, dict] | None:
        found = {w["name"]: w for w in c.workflows()["workflows"]}
        return found if all(n in found for n in names) else None

    return wait_until(listing, message=f"the registry to list {names}")


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("timeout=soon", "bad timeout"),
        ("max_attempts=0", "bad max_attempts"),
        ("concurrency=many", "bad concurrency"),
        ("key=host", "key needs concurrency"),
        ("retries=3", "unknown option 'retries'"),
        ("fast", "unknown option 'fast'"),
    ],
)
def test_a_bad_header_option_is_the_scripts_load_error(daemon: DaemonHandle, header: str, why: str):
    daemon.write("job", f"#!/bin/sh\n# ys: {header}\necho hi\n", mode=0o700)
    wf = _listed(daemon, "job")["job"]
    assert why in (wf["error"] or ""), wf
    shown = daemon.ys("workflows")
    assert why in shown.stdout + shown.stderr


def test_header_and_decorator_options_are_parsed(daemon: DaemonHandle):
    daemon.write(
        "sh", "#!/bin/sh\n# ys: timeout=10m max_attempts=3 concurrency=1 key=host\n", mode=0o700
    )
    write(
        daemon,
        "py",
        """
        @ys.workflow(timeout="1h", max_attempts=5, concurrency=2, key="account")
        def main(step, params):
            return 1
        """,
    )
    write(
        daemon,
        "badpy",
        """
        @ys.workflow(timeout=[1])
        def main(step, params):
            return 1
        """,
    )
    listing = _listed(daemon, "sh", "py", "badpy")
    sh, py = listing["sh"], listing["py"]
    assert sh["error"] is None and py["error"] is None, (sh, py)
    assert (sh["timeout"], sh["max_attempts"], sh["concurrency"], sh["key"]) == (600, 3, 1, "host")
    assert (py["timeout"], py["max_attempts"], py["concurrency"], py["key"]) == (
        3600,
        5,
        2,
        "account",
    )
    assert "bad timeout" in (listing["badpy"]["error"] or "")
