"""Shell workflows end to end: `ys step run|sleep|start|wait|params` in `#!/bin/sh` scripts
run by a real daemon. A script runs again from the top after each suspension; finished steps
replay their saved results instead of running again."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cron_support import out_json, shell, wait_status, wait_until

HEAVY = {"typer", "click", "rich", "asyncio", "aiohttp"}


def trigger(daemon, workflow: str, **params) -> str:
    with daemon.client() as c:
        return c.trigger(workflow, params)["execution_id"]


def test_a_run_step_runs_its_command_once_though_the_script_runs_twice(shared, tmp_path):
    count = tmp_path / "count"
    shell(
        shared,
        "twice",
        f"""
        echo "attempt $YS_ATTEMPT"
        out=$(ys step run greet -- sh -c 'echo ran >> {count}; echo "hello $1"' sh world)
        slow=$(YS_NO_FAST_PATH=1 ys step run slow -- echo -n typer)
        ys step sleep nap 0.3
        echo "after the nap: $out"
    """,
    )
    execution_id = trigger(shared, "twice")
    record = wait_status(shared, execution_id, "completed", "failed")
    assert record["outcome"] == {
        "status": "completed",
        "result": {"exit_status": 0, "last_line": "after the nap: hello world"},
    }
    assert count.read_text() == "ran\n"  # once, though the script ran twice
    assert record["attempts"] == 2
    with shared.client() as c:
        steps = {s["key"]: s for s in c.describe(execution_id)["steps"]}
    assert steps["greet"]["kind"] == "run" and steps["greet"]["status"] == "completed"
    assert steps["greet"]["value"] == {"stdout": "hello world\n", "status": 0}
    assert steps["slow"]["value"] == {"stdout": "typer", "status": 0}  # typer path: the same
    assert steps["nap"]["kind"] == "sleep" and steps["nap"]["status"] == "completed"
    log = shared.ys("logs", execution_id)
    assert "attempt 1" in log.stdout and "attempt 2" in log.stdout


def test_a_failing_command_fails_the_workflow_with_its_exit_status(shared):
    shell(
        shared,
        "fails",
        """
        echo "before"
        ys step run boom -- sh -c 'echo "disk full" >&2; exit 3'
        echo "never printed"
    """,
    )
    execution_id = trigger(shared, "fails")
    record = wait_status(shared, execution_id, "completed", "failed")
    error = record["outcome"]["error"]
    assert (error["name"], error["code"]) == ("ExitStatus", "EXIT_STATUS")
    assert error["message"].startswith("exit status 3") and "disk full" in error["message"]
    with shared.client() as c:
        [boom] = c.describe(execution_id)["steps"]
    assert boom["status"] == "failed"  # recorded: a replay exits 3 again, `ys retry` reruns it
    assert boom["value"] == {
        "stdout": "",
        "status": 3,
        "error": {"name": "ExitStatus", "message": "exit status 3", "code": "EXIT_STATUS"},
    }


def test_a_script_without_a_suspension_completes_with_its_last_line(shared, tmp_path):
    params_out = tmp_path / "params.json"
    shell(
        shared,
        "params",
        f"""
        ys step params > {params_out}
        echo "order $(ys step params order) for $(ys step params who)"
    """,
    )
    execution_id = trigger(shared, "params", order=42, who="ann", tags=["a"])
    record = wait_status(shared, execution_id, "completed", "failed")
    assert record["outcome"]["result"] == {"exit_status": 0, "last_line": "order 42 for ann"}
    assert json.loads(params_out.read_text()) == {"order": 42, "who": "ann", "tags": ["a"]}


def test_a_start_step_starts_its_child_once(shared, tmp_path):
    seen = tmp_path / "children"
    shell(
        shared,
        "parent",
        f"""
        child=$(ys step start kid hello -p n=5)
        echo "$child" >> {seen}
        ys step sleep nap 0.3
        echo "started $child"
    """,
    )
    execution_id = trigger(shared, "parent")
    record = wait_status(shared, execution_id, "completed", "failed")
    first, second = seen.read_text().splitlines()
    assert first == second and record["outcome"]["result"]["last_line"] == f"started {first}"
    with shared.client() as c:
        children = c.list(parent=execution_id)["executions"]
        assert [ch["execution_id"] for ch in children] == [first]
        child = c.wait(first, timeout=20)
    assert child["params"] == {"n": 5} and child["outcome"]["result"] == "hello 5"
    assert child["parent"] == {"execution_id": execution_id, "step_key": "kid", "detached": False}


def test_a_wait_step_suspends_until_the_value_is_put_and_a_timeout_fails(shared):
    shell(
        shared,
        "approve",
        """
        answer=$(ys step wait approval "approvals/$(ys step params order)" --timeout 1h)
        echo "answer: $answer"
    """,
    )
    shell(
        shared,
        "impatient",
        """
        ys step wait approval approvals/never --timeout 0.2
    """,
    )
    waiting = trigger(shared, "approve", order=7)
    late = trigger(shared, "impatient")
    wait_status(shared, waiting, "suspended")
    with shared.client() as c:
        c.store_put("approvals/7", "yes")
    record = wait_status(shared, waiting, "completed", "failed")
    assert record["outcome"]["result"]["last_line"] == "answer: yes"
    failed = wait_status(shared, late, "completed", "failed")
    message = failed["outcome"]["error"]["message"]
    assert message.startswith("exit status 6") and "WAIT_TIMEOUT" in message


def test_a_cancelled_shell_workflow_ends_at_its_next_step(shared, tmp_path):
    after = tmp_path / "after"
    shell(
        shared,
        "napper",
        f"""
        ys step sleep nap 1h
        touch {after}
    """,
    )
    execution_id = trigger(shared, "napper")
    wait_status(shared, execution_id, "suspended")
    assert shared.ys("cancel", execution_id).returncode == 0
    assert (
        wait_status(shared, execution_id, "cancelled", "completed", "failed")["status"]
        == "cancelled"
    )
    assert not after.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["params"],
        ["run", "k", "--", "true"],
        ["sleep", "k", "1"],
        ["start", "k", "hello"],
        ["wait", "k", "key"],
    ],
)
def test_ys_step_outside_a_shell_workflow_exits_2(shared, args):
    fast = shared.ys("step", *args)
    slow = shared.ys("step", *args, env={"YS_NO_FAST_PATH": "1"})
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        slow.returncode,
        slow.stdout,
        slow.stderr,
    )
    assert fast.returncode == 2
    assert fast.stderr.startswith("INVALID_ARGUMENT: ys step runs only inside a shell workflow")
    assert len(fast.stderr.splitlines()) == 1


def test_ys_step_loads_neither_typer_nor_rich(shared, tmp_path):
    out = tmp_path / "modules.json"
    probe = f"""
import atexit, json, sys
def dump():
    with open({str(out)!r}, "w") as f:
        json.dump(sorted({{m.split(".")[0] for m in sys.modules}} & set({sorted(HEAVY)!r})), f)
atexit.register(dump)
sys.argv = ["ys", "step", "params"]
from ys.cli import main
main()
"""
    subprocess.run([sys.executable, "-c", probe], env=shared.env, capture_output=True, timeout=60)
    assert json.loads(out.read_text()) == []


def test_shell_workflows_are_listed_as_shell(shared):
    shell(shared, "listed", "echo hi")
    found = wait_until(
        lambda: {w["name"]: w for w in out_json(shared.ys("workflows", "--json"))["workflows"]}.get(
            "listed"
        ),
        message="listed",
    )
    assert found["kind"] == "shell" and found["error"] is None


def test_a_sleep_past_year_9999_is_a_usage_error_of_ys_step(shared, tmp_path):
    """2,920,000 days parses as a duration, but its wake would be past 9999: `ys step sleep`
    exits 2 with INVALID_ARGUMENT (not 1, INTERNAL), which ends the script (set -e)."""
    err = tmp_path / "sleep.err"
    shell(
        shared,
        "far-nap",
        f"""
        ys step sleep nap 2920000d 2> {err}
    """,
    )
    execution_id = trigger(shared, "far-nap")
    record = wait_status(shared, execution_id, "completed", "failed")
    assert record["outcome"]["error"]["message"].startswith("exit status 2")
    line = err.read_text()
    assert line.startswith("INVALID_ARGUMENT:") and "year 10000" in line, line


def test_a_shell_replay_does_not_warn_of_non_deterministic_keys(shared, tmp_path):
    """Each `ys step` is a process of its own that sees one step: a new key there is not a
    sign that recorded ones were skipped."""
    shell(
        shared,
        "no-drift",
        """
        ys step run first -- echo one
        ys step sleep nap 0.2
        ys step run second -- echo two
    """,
    )
    execution_id = trigger(shared, "no-drift")
    assert wait_status(shared, execution_id, "completed", "failed")["status"] == "completed"
    log = shared.ys("logs", execution_id)
    assert "non-deterministic" not in log.stdout + log.stderr
