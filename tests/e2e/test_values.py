"""Durable values through a real daemon: values equal within one type are the same params,
and a value too big to save is a step's (or the execution's) failure, recorded once."""

from __future__ import annotations

import json

import pytest
from e2e_support import fixture_dir, kinds, lines, write_workflow

from tests.support import DaemonHandle

pytestmark = pytest.mark.e2e

ECHO = """
@ys.workflow
def main(step, params):
    return params
"""


def test_minus_zero_and_zero_are_the_same_params_to_use_existing(daemon: DaemonHandle):
    write_workflow(daemon, "echo", ECHO)
    first = daemon.ys("trigger", "echo", "--id", "zero-1", "-p", "x=0.0", "--json")
    assert json.loads(first.stdout) == {"execution_id": "zero-1", "started": True}, first.stderr

    again = daemon.ys(
        "trigger", "echo", "--id", "zero-1", "-p", "x=-0.0", "--if-exists", "use-existing", "--json"
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"execution_id": "zero-1", "started": False}

    # 0 (an int) is another durable value than 0.0, as 1 is another than 1.0
    other = daemon.ys(
        "trigger", "echo", "--id", "zero-1", "-p", "x=0", "--if-exists", "use-existing"
    )
    assert other.returncode == 3, other.stderr
    assert other.stderr.startswith("EXECUTION_ID_CONFLICT: ")
    record = daemon.client().wait("zero-1", timeout=30)
    assert record["params"] == {"x": 0.0} and isinstance(record["params"]["x"], float)


BIG_STEP = """
def big(d):
    note(d, "big")
    return "z" * 10_000_000

@ys.workflow
def main(step, params):
    try:
        step.run("big", big, params["d"])
    except ys.ValueTooLarge as exc:
        caught = str(exc)
    step.sleep("nap", 0.2)  # one more delivery: the failed step replays without running
    if params.get("raise"):
        step.run("big-again", big, params["d"])
    return caught
"""


def test_a_step_result_too_big_to_save_is_the_steps_failure_recorded_once(
    daemon: DaemonHandle, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "bigstep", BIG_STEP)
    c = daemon.client()
    c.trigger("bigstep", {"d": str(fx)}, execution_id="big-1")
    record = c.wait("big-1", timeout=60)
    assert record["status"] == "completed", record
    caught = record["outcome"]["result"]
    assert "step 'big' result is 10000002 bytes encoded" in caught and "2 MiB" in caught
    assert lines(fx) == ["big"]  # it ran once, though the workflow ran twice
    assert record["attempts"] == 2
    [step] = [s for s in c.describe("big-1")["steps"] if s["key"] == "big"]
    assert step["status"] == "failed" and step["attempts"] == 1
    assert step["value"]["name"] == "ValueTooLarge"
    assert step["value"]["code"] == "INVALID_ARGUMENT"
    assert "released" not in kinds(c, "big-1")  # never a delivery to retry

    # not caught, it fails the execution at that step, with the limit in its message
    c.trigger("bigstep", {"d": str(fx), "raise": True}, execution_id="big-2")
    record = c.wait("big-2", timeout=60)
    assert record["status"] == "failed", record
    error = record["outcome"]["error"]
    assert error["name"] == "ValueTooLarge" and "2 MiB" in error["message"]
    assert "released" not in kinds(c, "big-2")


def test_a_workflow_result_too_big_to_save_fails_the_execution(daemon: DaemonHandle):
    write_workflow(
        daemon,
        "bigresult",
        """
        @ys.workflow
        def main(step, params):
            return "z" * 10_000_000
    """,
    )
    c = daemon.client()
    c.trigger("bigresult", execution_id="big-result")
    record = c.wait("big-result", timeout=60)
    assert record["status"] == "failed", record
    error = record["outcome"]["error"]
    assert (error["name"], error["code"]) == ("ValueTooLarge", "INVALID_ARGUMENT")
    assert "result is 10000002 bytes encoded" in error["message"]
    assert "2 MiB" in error["message"]
    assert record["attempts"] == 1 and "released" not in kinds(c, "big-result")


def test_a_shell_step_whose_output_is_too_big_to_save_keeps_its_head_and_tail(
    daemon: DaemonHandle, tmp_path
):
    fx = fixture_dir(tmp_path)
    daemon.write(
        "bigout",
        f"""#!/bin/sh
set -e
ys step run big -- sh -c 'echo ran >> {fx}/effects; head -c 4000000 /dev/zero | tr "\\0" z' | wc -c
""",
        mode=0o700,
    )
    c = daemon.client()
    c.trigger("bigout", execution_id="big-out")
    record = c.wait("big-out", timeout=60)
    # The command ran once and its status is its own: the script got all its output, the
    # record keeps its head and tail with its length (docs/design.md, "Workflow options")
    assert record["status"] == "completed", record
    assert record["outcome"]["result"]["last_line"].strip() == "4000000"
    assert lines(fx) == ["ran"]
    [step] = c.describe("big-out")["steps"]
    assert step["status"] == "completed" and step["value"]["status"] == 0
    assert step["value"]["stdout_bytes"] == 4000000 and len(step["value"]["stdout"]) == 1 << 20
    assert record["attempts"] == 1 and "released" not in kinds(c, "big-out")
