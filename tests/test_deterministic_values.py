"""step.now(), step.uuid() and step.random(): recorded once like a step, the same on every
replay; and the warning when a replay asks for new step keys while recorded ones were never
reached (a key made from a uuid or a time reruns its step on every delivery)."""

from __future__ import annotations

import uuid
from typing import Any

import ys
from ys.testing import WorkflowTest

T0 = 1_800_000_000.0


def test_now_uuid_and_random_are_recorded_once_and_replayed():
    seen: list[tuple[Any, ...]] = []

    def main(step: ys.Step, params: Any) -> Any:
        values = (step.now(), step.uuid(), step.random(), step.uuid("order-id"))
        seen.append(values)
        step.sleep("nap", 60)
        return list(values)

    with WorkflowTest({"w": main}, start=T0) as t:
        eid = t.trigger("w")
        rec = t.run_until_terminal(eid)
    assert rec["status"] == "completed"
    first, second = seen
    assert first == second  # the replay got the recorded values
    now, a, r, b = first
    assert now == T0
    assert uuid.UUID(a) and uuid.UUID(b) and a != b
    assert 0.0 <= r < 1.0
    assert rec["outcome"]["result"] == list(first)


def test_a_replay_asking_for_new_keys_while_recorded_ones_were_not_reached_warns(capsys):
    def main(step: ys.Step, params: Any) -> Any:
        step.run(f"fetch-{uuid.uuid4()}", lambda: 1)  # a new key on every delivery
        step.run(f"store-{uuid.uuid4()}", lambda: 2)
        step.sleep("nap", 60)
        return "done"

    with WorkflowTest({"w": main}, start=T0) as t:
        eid = t.trigger("w")
        t.run_until_terminal(eid)
        ended = [e for e in t.history(eid) if e["kind"] in ("suspended", "completed")]
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "non-deterministic" in line]
    assert len(warnings) == 1, err  # once per delivery: the second delivery only
    assert "fetch-" in warnings[0] and "step.uuid()" in warnings[0]
    # recorded with the delivery's outcome, as the daemon records it (`describe` shows it)
    assert ["warnings" in e["data"] for e in ended] == [False, True]
    assert "ys: warning: " + ended[1]["data"]["warnings"][0] == warnings[0]


def test_a_deterministic_replay_does_not_warn(capsys):
    def main(step: ys.Step, params: Any) -> Any:
        key = step.uuid("id")
        step.run(f"fetch-{key}", lambda: 1)
        step.sleep("nap", 60)
        return step.run("after", lambda: 2)

    with WorkflowTest({"w": main}, start=T0) as t:
        assert t.run_until_terminal(t.trigger("w"))["status"] == "completed"
    assert "non-deterministic" not in capsys.readouterr().err
