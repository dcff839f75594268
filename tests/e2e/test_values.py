"""Durable values through a real daemon: values equal within one type are the same params,
and a value too big to save is a step's (or the execution's) failure, recorded once."""

from __future__ import annotations

import json

import pytest
from e2e_support import write_workflow

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

    again = daemon.ys("trigger", "echo", "--id", "zero-1", "-p", "x=-0.0",
                      "--if-exists", "use-existing", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"execution_id": "zero-1", "started": False}

    # 0 (an int) is another durable value than 0.0, as 1 is another than 1.0
    other = daemon.ys("trigger", "echo", "--id", "zero-1", "-p", "x=0",
                      "--if-exists", "use-existing")
    assert other.returncode == 3, other.stderr
    assert other.stderr.startswith("EXECUTION_ID_CONFLICT: ")
    record = daemon.client().wait("zero-1", timeout=30)
    assert record["params"] == {"x": 0.0} and isinstance(record["params"]["x"], float)
