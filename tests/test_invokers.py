"""RFC 003: worker and test invokers receive the same event and runner behaviour, and their
deliver results match. The same scripts run under a real daemon and under ys.testing."""

from __future__ import annotations

import pytest

from tests.conftest import DaemonHandle
from ys.testing import WorkflowTest

SCRIPTS = {
    "returns.py": """
        import ys

        @ys.workflow
        def main(step, params):
            a = step.run("a", lambda: params["x"] * 2)
            return {"a": a, "ctx": step.workflow}
    """,
    "raises.py": """
        import ys

        def main(step, params):
            step.run("ok", lambda: 1)
            raise ValueError("bad order " + str(params["x"]))
    """,
    "sleeps.py": """
        import ys

        @ys.workflow
        def main(step, params):
            step.sleep("nap", 0.2)
            return step.run("after", lambda: "woke")
    """,
    "retries.py": """
        import ys

        def flaky(attempt_box=[]):
            raise RuntimeError("always")

        @ys.workflow
        def main(step, params):
            return step.run("flaky", flaky, retry=ys.Retry(max_attempts=2, interval=0.1))
    """,
    "step-error-caught.py": """
        import ys

        def boom():
            raise KeyError("k")

        @ys.workflow
        def main(step, params):
            try:
                step.run("boom", boom)
            except KeyError as exc:
                return {"caught": type(exc).__name__}
    """,
}


@pytest.fixture
def both(daemon: DaemonHandle, tmp_path):
    for name, src in SCRIPTS.items():
        daemon.write(name, src)
    return daemon


@pytest.mark.parametrize("workflow", [n[:-3] for n in SCRIPTS])
def test_worker_and_test_invokers_give_the_same_outcome(both: DaemonHandle, workflow: str):
    c = both.client()
    eid = c.trigger(workflow, {"x": 21})["execution_id"]
    real = c.wait(eid, timeout=60)
    assert real["status"] in ("completed", "failed"), real

    with WorkflowTest(both.workflows) as t:
        tid = t.trigger(workflow, {"x": 21})
        fake = t.run_until_terminal(tid)
        steps_fake = [(s.key, s.status, s.attempts) for s in t.store.steps(tid)]

    assert fake["status"] == real["status"]
    assert fake["outcome"] == real["outcome"]
    steps_real = [(s["key"], s["status"], s["attempts"]) for s in c.describe(eid)["steps"]]
    assert steps_real == steps_fake
    assert steps_real  # every script records at least one step


def test_testing_clock_moves_without_sleeping(tmp_path):
    slept = {"n": 0}

    def wf(step, params):
        step.sleep("cooldown", 600)
        slept["n"] += 1
        return "done"

    with WorkflowTest({"wf": wf}, start=1_000_000.0) as t:
        eid = t.trigger("wf")
        assert t.run() == 1
        rec = t.get(eid)
        assert rec["status"] == "suspended"
        assert t.run() == 0  # not due yet: the clock has not moved
        t.advance(599)
        assert t.run() == 0
        t.advance(1)
        assert t.run() == 1
        assert t.get(eid)["outcome"] == {"status": "completed", "result": "done"}
        assert slept["n"] == 1  # the line after the sleep ran only once the timer was due
