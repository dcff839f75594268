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
    "an effect lookup answering a dict": (
        "    return step.effect('e', effect_id='eff-parity', operation='op', input={},\n"
        "                       perform=lambda e: 1 / 0, lookup=lambda e: {'a': 1},\n"
        "                       retry_in=0.2)\n",
        "TypeError",
        "EFFECT_HANDLER_INVALID",
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
