"""ys.testing's documented ways in: crash a delivery mid-step, cancel, read the history, the
steps and the effect ledger; and what it refuses (unknown names, shell workflows). Parity
with a real daemon is checked in tests/e2e/test_testing_parity.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ys
from ys.testing import WorkflowTest


def test_a_crash_mid_step_loses_the_step_and_the_next_delivery_runs_it_again():
    ran: list[str] = []

    def main(step: ys.Step, params: Any) -> Any:
        return step.run("charge", lambda: ran.append("charge") or len(ran))

    with WorkflowTest({"pay": main}) as t:
        t.crash_at("charge")
        eid = t.trigger("pay")
        rec = t.run_until_terminal(eid)
        assert rec["outcome"] == {"status": "completed", "result": 2}
        assert ran == ["charge", "charge"]
        kinds = [e["kind"] for e in t.history(eid)]
        assert kinds == ["admitted", "claimed", "released", "claimed", "step", "completed"]
        assert [(s["key"], s["status"], s["value"]) for s in t.steps(eid)] == [
            ("charge", "completed", 2)
        ]


def test_cancel_reaches_the_workflow_at_its_next_step():
    def main(step: ys.Step, params: Any) -> Any:
        step.sleep("nap", 60)
        return step.run("after", lambda: "ran")

    with WorkflowTest({"nap": main}) as t:
        eid = t.trigger("nap")
        t.run()
        assert t.cancel(eid) is True
        rec = t.run_until_terminal(eid)
        assert rec["status"] == "cancelled"
        assert "after" not in [s["key"] for s in t.steps(eid)]


def test_the_effect_ledger_is_readable():
    def main(step: ys.Step, params: Any) -> Any:
        return step.effect(
            "charge",
            effect_id="shop:1",
            operation="charge.v1",
            input={"amount": 5},
            perform=lambda e: {"charge": "ch_1"},
            lookup=lambda e: ys.NotFound(),
        )

    with WorkflowTest({"pay": main}) as t:
        t.run_until_terminal(t.trigger("pay"))
        assert t.effect("shop:1")["status"] == "settled"
        assert [e["effect_id"] for e in t.effects(status="settled")] == ["shop:1"]
        with pytest.raises(ys.NotFoundError):
            t.effect("shop:2")


def test_an_unknown_workflow_is_refused_as_the_daemon_refuses_it():
    with WorkflowTest({"known": lambda step, params: None}) as t:
        with pytest.raises(ys.NotFoundError) as info:
            t.trigger("unknown")
        assert info.value.code == "WORKFLOW_NOT_FOUND"


def test_a_shell_workflow_of_a_folder_is_refused_clearly(tmp_path: Path):
    script = tmp_path / "backup"
    script.write_text("#!/bin/sh\nys step run copy -- true\n")
    script.chmod(0o700)
    (tmp_path / "hello.py").write_text("def main(step, params):\n    return 'hi'\n")
    with WorkflowTest(tmp_path) as t:
        with pytest.raises(NotImplementedError, match="backup is a shell workflow"):
            t.trigger("backup")
        assert t.run_until_terminal(t.trigger("hello"))["outcome"]["result"] == "hi"
