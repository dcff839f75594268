"""The same scripts run through a real daemon and through `ys.testing` end alike: the same
status, error and history (tests/e2e/parity_support.py)."""

from __future__ import annotations

import pytest
from parity_support import run_both

pytestmark = pytest.mark.e2e

HEADER = "import ys\n\n\n@ys.workflow\ndef main(step, params):\n"

# A request the daemon refuses for good fails the execution at once, with the refusal: no
# delivery could change it (as a TypeError in a step's own code fails it).
REFUSED = {
    "a wait_for key that is not text": (
        "    return step.wait_for('w', 123)\n",
        "InvalidArgument",
        "INVALID_ARGUMENT",
    ),
    "a step raising TypeError": ("    return step.run('s', len, 5)\n", "TypeError", None),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_request_fails_the_execution_at_once_both_ways(daemon, case):
    body, name, code = REFUSED[case]
    real, sim = run_both(daemon, "refused.py", HEADER + body, timeout=15)
    assert real.status == "failed", real
    error = real.outcome["error"]
    assert (error["name"], error.get("code")) == (name, code)
    assert "released" not in real.kinds  # never retried as an infrastructure failure
    assert real == sim


def test_an_effect_lookup_answering_what_the_driver_cannot_read_is_redelivered_both_ways(daemon):
    """RFC 004: EFFECT_HANDLER_INVALID records no step, keeps the effect pending and asks for
    another delivery (a fixed lookup may answer); past max_attempts the execution fails, the
    same through the daemon and ys.testing."""
    script = (
        "import ys\n\n\n@ys.workflow(max_attempts=2)\ndef main(step, params):\n"
        "    return step.effect('e', effect_id='eff-parity', operation='op', input={},\n"
        "                       perform=lambda e: 1 / 0, lookup=lambda e: {'a': 1},\n"
        "                       retry_in=0.2)\n"
    )
    real, sim = run_both(daemon, "handler.py", script, timeout=30)
    assert real.status == "failed", real
    error = real.outcome["error"]
    assert error["name"] == "DeliveryAttemptsExhausted"
    assert "EFFECT_HANDLER_INVALID" in error["message"]
    assert real.kinds.count("released") == 2  # each lookup answer: no step, a redelivery
    assert real == sim


@pytest.mark.parametrize("how", ["start", "call"])
def test_a_child_of_a_workflow_that_does_not_exist_is_refused_in_the_step_both_ways(daemon, how):
    """As `ys trigger` refuses the name: WORKFLOW_NOT_FOUND, raised where the step is called
    (recorded, so a replay raises it again), which fails a workflow that does not catch it."""
    body = f"    return step.{how}('child', 'no-such-workflow', {{}})\n"
    real, sim = run_both(daemon, "parent.py", HEADER + body, timeout=15)
    assert real.status == "failed", real
    error = real.outcome["error"]
    assert (error["name"], error["code"]) == ("NotFoundError", "WORKFLOW_NOT_FOUND")
    assert "no-such-workflow" in error["message"]
    assert real == sim
    c = daemon.client()
    assert c.list(workflow="no-such-workflow")["executions"] == []


def test_a_refused_child_can_be_caught_and_stays_refused_on_replay(daemon):
    body = (
        "    try:\n"
        "        step.start('child', 'no-such-workflow')\n"
        "    except ys.NotFoundError as exc:\n"
        "        refused = exc.code\n"
        "    step.sleep('nap', 0.1)\n"
        "    return refused\n"
    )
    real, sim = run_both(daemon, "catcher.py", HEADER + body, timeout=15)
    assert real.ended == ("WORKFLOW_NOT_FOUND", None, None), real
    assert real == sim


def test_a_bare_except_around_a_sleep_does_not_swallow_its_suspension_both_ways(daemon):
    """The sleep's suspension is a BaseException (`except Exception` cannot catch it); a bare
    `except:` can, but the delivery still ends suspended, and the sleep is honoured."""
    body = (
        "    try:\n"
        "        step.sleep('nap', 0.2)\n"
        "    except:  # noqa: E722\n"
        "        print('caught')\n"
        "    return step.run('after', lambda: 'woke')\n"
    )
    real, sim = run_both(daemon, "bare.py", HEADER + body, timeout=15)
    assert real.ended == ("woke", None, None), real
    assert real.kinds == (
        "admitted",
        "claimed",
        "step",
        "suspended",
        "claimed",
        "step",
        "step",
        "completed",
    )
    logs = daemon.ys("logs", real.execution_id)
    assert "caught" in logs.stdout
    assert "lease" not in logs.stdout + logs.stderr  # no misleading LEASE_LOST retry
    assert real == sim


TIMEOUTS = {
    "no retry": ("None", "failed"),
    "a retry that succeeds": ("ys.Retry(max_attempts=2, interval=0.1)", "completed"),
}


@pytest.mark.parametrize("case", sorted(TIMEOUTS))
def test_a_step_past_its_timeout_is_recorded_as_the_daemon_kills_it_both_ways(daemon, case):
    """ys.testing cannot kill its own process: it measures the attempt, and one that ran past
    its `timeout=` is recorded as the daemon records it (StepTimeout, retried by `retry=`),
    its result discarded."""
    retry, status = TIMEOUTS[case]
    body = (
        "    import time\n"
        "    def slow():\n"
        "        if step.attempt == 1:\n"
        "            time.sleep(1.5)\n"
        "        return 'done'\n"
        f"    return step.run('slow', slow, timeout=0.5, retry={retry})\n"
    )
    real, sim = run_both(daemon, "slow.py", HEADER + body, timeout=30)
    assert real.status == status, real
    if status == "failed":
        assert real.ended[1:] == ("StepTimeout", "STEP_TIMEOUT")
    assert real == sim
