"""A step's policy and duration arguments are checked when the step is called, first time or
replayed, succeeding or not: a wrong type is a TypeError naming the argument (and the type to
pass), never an AttributeError from inside ys, nor silence because the step succeeded."""

from __future__ import annotations

from typing import Any

import pytest

import ys
from ys.testing import WorkflowTest

CALLS = {
    "retry=5 on a step that succeeds": (
        lambda step: step.run("s", int, retry=5),
        ["retry", "ys.Retry"],
    ),
    "retry=5 on a step that fails": (
        lambda step: step.run("s", int, "x", retry=5),
        ["retry", "ys.Retry"],
    ),
    "retry as a dict": (
        lambda step: step.run("s", int, retry={"max_attempts": 3}),
        ["retry", "ys.Retry"],
    ),
    "timeout as a list": (lambda step: step.run("s", int, timeout=[1]), ["timeout"]),
    "sleep seconds as text": (lambda step: step.sleep("nap", "soon"), ["seconds"]),
    "wait_for timeout as a list": (
        lambda step: step.wait_for("w", "k", timeout=[5]),
        ["timeout"],
    ),
    "wait_for newer_than as text": (
        lambda step: step.wait_for("w", "k", newer_than="1"),
        ["newer_than"],
    ),
}


@pytest.mark.parametrize("case", sorted(CALLS))
def test_a_wrong_policy_or_duration_type_fails_the_step_call_naming_the_argument(case):
    call, words = CALLS[case]

    def main(step: ys.Step, params: Any) -> Any:
        return call(step)

    with WorkflowTest({"w": main}) as t:
        rec = t.run_until_terminal(t.trigger("w"))
    assert rec["status"] == "failed"
    error = rec["outcome"]["error"]
    assert error["name"] in ("TypeError", "ValueError"), error
    for word in words:
        assert word in error["message"], error


@pytest.mark.parametrize("seconds", ["soon", None, [1]])
def test_a_replayed_sleep_checks_its_seconds_too(seconds):
    """The first delivery slept with a good value; a later code change passes a bad one."""
    asked: list[Any] = [1.0]

    def main(step: ys.Step, params: Any) -> Any:
        step.sleep("nap", asked[0])
        return "woke"

    with WorkflowTest({"w": main}) as t:
        eid = t.trigger("w")
        t.run()
        asked[0] = seconds
        rec = t.run_until_terminal(eid)
    assert rec["status"] == "failed"
    assert rec["outcome"]["error"]["name"] == "TypeError"
    assert "seconds" in rec["outcome"]["error"]["message"]
