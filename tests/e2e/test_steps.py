"""Step semantics seen through a real daemon: durable retries and unique step keys."""

from __future__ import annotations

import pytest
from e2e_support import events, fixture_dir, lines, write_workflow

pytestmark = pytest.mark.e2e

FLAKY = """
def flaky(d, succeed_on):
    effects = pathlib.Path(d, "effects")
    n = len(effects.read_text().splitlines()) + 1 if effects.exists() else 1
    note(d, "attempt " + str(n))
    if n < succeed_on:
        raise ValueError("boom " + str(n))
    return "ok after " + str(n)

@ys.workflow
def main(step, params):
    return step.run("flaky", flaky, params["d"], params["succeed_on"],
                    retry=ys.Retry(max_attempts=params["max"], interval=0.1))
"""


def test_retry_step_failing_twice_then_succeeding_completes_with_its_attempts_recorded(
    daemon, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "flaky", FLAKY)
    c = daemon.client()
    c.trigger("flaky", {"d": str(fx), "succeed_on": 3, "max": 3}, execution_id="flaky-1")
    record = c.wait("flaky-1", timeout=20)
    assert record["outcome"] == {"status": "completed", "result": "ok after 3"}
    assert lines(fx) == ["attempt 1", "attempt 2", "attempt 3"]
    [flaky_step] = c.describe("flaky-1")["steps"]
    assert (flaky_step["key"], flaky_step["status"], flaky_step["attempts"]) == (
        "flaky",
        "completed",
        3,
    )
    # each failed attempt was recorded with its wake, and the execution suspended for it
    steps = [e["data"] for e in events(c, "flaky-1") if e["kind"] == "step"]
    assert [(s["status"], s.get("attempts", 1)) for s in steps] == [
        ("waiting", 1),
        ("waiting", 2),
        ("completed", 3),
    ]
    assert all("wake_at" in s for s in steps[:2])
    assert [d["outcome"] for d in c.describe("flaky-1")["deliveries"]] == [
        "suspended",
        "suspended",
        "completed",
    ]


def test_retry_step_exhausting_its_attempts_fails_the_workflow_with_the_last_error(
    daemon, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "flaky", FLAKY)
    c = daemon.client()
    c.trigger("flaky", {"d": str(fx), "succeed_on": 99, "max": 3}, execution_id="flaky-2")
    record = c.wait("flaky-2", timeout=20)
    assert record["status"] == "failed"
    error = record["outcome"]["error"]
    assert (error["name"], error["message"]) == ("ValueError", "boom 3")
    assert lines(fx) == ["attempt 1", "attempt 2", "attempt 3"]
    [flaky_step] = c.describe("flaky-2")["steps"]
    assert (flaky_step["status"], flaky_step["attempts"]) == ("failed", 3)


def test_step_key_used_twice_in_one_run_fails_the_workflow(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    write_workflow(
        daemon,
        "twice",
        """
        @ys.workflow
        def main(step, params):
            step.run("load", note, params["d"], "first")
            step.run("load", note, params["d"], "second")
            return "unreachable"
    """,
    )
    c = daemon.client()
    c.trigger("twice", {"d": str(fx)}, execution_id="twice-1")
    record = c.wait("twice-1", timeout=20)
    assert record["status"] == "failed"
    error = record["outcome"]["error"]
    assert error.get("code") == "DUPLICATE_STEP_KEY"
    assert "'load'" in error["message"]
    assert lines(fx) == ["first"]  # the second use never ran
    assert record["attempts"] == 1


BIG = """
@ys.workflow
def main(step, params):
    small = step.run("small", lambda: "s")
    big = step.run("big", lambda: "é" * params["n"])
    return {"small": small, "big": big}
"""


def test_big_step_results_and_outcomes_are_saved_like_small_ones(daemon):
    # A big step value and outcome travel, are fenced and saved like small ones (a big
    # outcome is encoded in the daemon's thread pool, a small one on its event loop).
    write_workflow(daemon, "big", BIG)
    c = daemon.client()
    n = 300_000  # 600 kB as UTF-8: the outcome is past the small-body size (the pool path)
    c.trigger("big", {"n": n}, execution_id="big-1")
    record = c.wait("big-1", timeout=30)
    assert record["outcome"] == {"status": "completed", "result": {"small": "s", "big": "é" * n}}
    steps = {s["key"]: s for s in c.describe("big-1")["steps"]}
    assert steps["small"]["value"] == "s" and steps["big"]["value"] == "é" * n


THREE_SLEEPS = {
    "python": (
        "three_sleeps.py",
        """
        import ys

        @ys.workflow
        def main(step, params):
            step.sleep("a", 0.2)
            step.sleep("b", 0.2)
            step.sleep("c", 0.2)
            return "slept"
        """,
        0o600,
    ),
    "shell": (
        "three_sleeps",
        "#!/bin/sh\nset -e\nys step sleep a 0.2\nys step sleep b 0.2\nys step sleep c 0.2\n"
        "echo slept\n",
        0o700,
    ),
}


@pytest.mark.parametrize("language", sorted(THREE_SLEEPS))
def test_three_sleeps_in_a_row_cost_four_deliveries(daemon, language):
    """Each delivery a wake starts completes one sleep and suspends on the next: no delivery
    in between reruns the script for nothing."""
    name, source, mode = THREE_SLEEPS[language]
    daemon.write(name, source, mode=mode)
    c = daemon.client()
    c.trigger(name.removesuffix(".py"), execution_id="sleeper")
    record = c.wait("sleeper", timeout=30)
    assert record["status"] == "completed", record
    outcomes = [d["outcome"] for d in c.describe("sleeper")["deliveries"]]
    assert outcomes == ["suspended", "suspended", "suspended", "completed"]
    assert [e["kind"] for e in events(c, "sleeper")].count("claimed") == 4
