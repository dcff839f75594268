"""The store refuses a step result or a workflow result over the limit of a saved value, and
the refusal writes nothing (the SDK checks the same limit first, so a worker never sends one)."""

from __future__ import annotations

from typing import Any

import pytest

from ys import codec
from ys.codec import MAX_VALUE_BYTES
from ys.errors import ValueTooLarge
from ys.outcomes import outcome_of
from ys.values import StepWrite

T0 = 1_000_000.0


def _claimed(store: Any) -> str:
    store.admit("big", {}, execution_id="big-1", now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=30.0)
    return str(d.token)


def _snapshot(store: Any) -> tuple[Any, ...]:
    return store.get("big-1"), store.history("big-1", limit=1000).items, store.steps("big-1")


def test_a_run_step_value_over_the_limit_is_refused_and_changes_nothing(store):
    token = _claimed(store)
    before = _snapshot(store)
    with pytest.raises(ValueTooLarge) as over:
        store.save_step(
            "big-1",
            token,
            "big",
            StepWrite("run", "completed", codec.dumps("z" * MAX_VALUE_BYTES)),
            now=T0 + 1,
        )
    assert over.value.code == "INVALID_ARGUMENT" and "2 MiB" in over.value.message
    assert _snapshot(store) == before
    # at the limit it is saved
    at_limit = codec.dumps("z" * (MAX_VALUE_BYTES - 4))
    store.save_step("big-1", token, "big", StepWrite("run", "completed", at_limit), now=T0 + 1)
    assert [s.value for s in store.steps("big-1")] == [at_limit]
    assert store.verify() == []


def test_a_completed_outcome_over_the_limit_is_refused_and_changes_nothing(store):
    token = _claimed(store)
    before = _snapshot(store)
    with pytest.raises(ValueTooLarge):
        store.acknowledge(
            "big-1",
            token,
            outcome_of({"status": "completed", "result": "z" * MAX_VALUE_BYTES}),
            now=T0 + 1,
        )
    assert _snapshot(store) == before
    assert store.verify() == []
