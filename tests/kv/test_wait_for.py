"""step.wait_for under ys.testing (a temporary store and a clock the test moves): a value put
before the wait, a wait woken by a put, merged puts, timeouts and their replay, `newer_than`,
and the rule that no put is missed between the check and the registration."""

from __future__ import annotations

from typing import Any

import pytest
from kv_support import KEY, T0

from ys import codec
from ys.store.protocols import ValueWritten
from ys.testing import WorkflowTest


def deliveries(t: WorkflowTest, eid: str) -> int:
    return [e.kind for e in t.store.events(eid)].count("claimed")


def step_of(t: WorkflowTest, eid: str, key: str = "approval") -> Any:
    return next(s for s in t.store.steps(eid) if s.key == key)


def count_checks(t: WorkflowTest, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every store_wait (a check, and a registration when nothing is there)."""
    calls: list[str] = []
    real = t.store.value_wait

    def store_wait(key: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(key)
        return real(key, *args, **kwargs)

    monkeypatch.setattr(t.store, "value_wait", store_wait)
    return calls


# -- a value put before the wait, and a wait woken by a put ---------------------------------


def test_a_put_before_the_wait_is_seen_without_suspending(wt: WorkflowTest) -> None:
    wt.put(KEY, True)
    eid = wt.trigger("approval")

    assert wt.run() == 1
    rec = wt.get(eid)
    assert rec["status"] == "completed" and rec["outcome"]["result"] == {"approved": True}
    assert deliveries(wt, eid) == 1
    assert "suspended" not in [e.kind for e in wt.store.events(eid)]
    assert step_of(wt, eid).status == "completed"
    assert wt.store.waits(eid) == []


def test_a_wait_suspends_and_a_put_wakes_it_once_and_it_completes_with_the_value(
    wt: WorkflowTest,
) -> None:
    eid = wt.trigger("approval")
    assert wt.run() == 1
    assert wt.get(eid)["status"] == "suspended"
    assert wt.get(eid)["due_at"] is None  # no timeout: only a put can wake it
    assert [(w.kind, w.key, w.step_key) for w in wt.store.waits(eid)] == [
        ("store", KEY, "approval")
    ]
    wt.advance(86400)
    assert wt.run() == 0  # nothing but the put wakes it

    assert wt.put(KEY, {"by": "ana"}) == 1
    assert wt.store.get(eid).due_at == wt.clock.now
    assert wt.run() == 1

    rec = wt.get(eid)
    assert rec["status"] == "completed" and rec["outcome"]["result"] == {"approved": {"by": "ana"}}
    assert deliveries(wt, eid) == 2
    assert wt.store.waits(eid) == []
    wt.put(KEY, {"by": "bo"})  # a later put finds no waiter and wakes nothing
    assert wt.run() == 0 and deliveries(wt, eid) == 2


def test_two_puts_while_suspended_give_one_delivery(wt: WorkflowTest) -> None:
    eid = wt.trigger("approval")
    other = wt.trigger("approval", {"key": "approve/order-43"})
    assert wt.run() == 2

    wt.put(KEY, "first")
    wt.advance(1)
    wt.put(KEY, "second")
    wt.put("approve/order-43", "only")
    assert wt.store.get(eid).due_at == T0  # the wakes merged into the earlier due time

    assert wt.run() == 2  # one delivery each
    assert deliveries(wt, eid) == 2 and deliveries(wt, other) == 2
    assert wt.get(eid)["outcome"]["result"] == {"approved": "second"}  # the value at delivery
    assert wt.get(other)["outcome"]["result"] == {"approved": "only"}


def test_a_put_to_another_key_or_a_delete_does_not_wake_the_waiter(wt: WorkflowTest) -> None:
    eid = wt.trigger("approval")
    assert wt.run() == 1
    wt.put("approve/order-420", True)
    wt.put("Approve/order-42", True)
    assert wt.store.value_delete(KEY) is False
    assert wt.run() == 0 and wt.get(eid)["status"] == "suspended"


# -- timeouts -------------------------------------------------------------------------------


def test_a_timeout_raises_wait_timeout_in_the_workflow(wt: WorkflowTest) -> None:
    eid = wt.trigger("approval", {"timeout": 60})
    assert wt.run() == 1
    assert wt.store.get(eid).due_at == T0 + 60
    wt.advance(59.999)
    assert wt.run() == 0

    wt.advance(0.001)
    assert wt.run() == 1

    rec = wt.get(eid)
    assert rec["status"] == "failed"
    assert rec["outcome"]["error"]["name"] == "WaitTimeout"
    assert rec["outcome"]["error"]["code"] == "WAIT_TIMEOUT"
    assert KEY in rec["outcome"]["error"]["message"]
    assert wt.store.waits(eid) == []


def test_the_workflow_can_catch_the_timeout_and_a_replay_raises_it_again_without_a_new_check(
    wt: WorkflowTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    eid = wt.trigger("patient")
    assert wt.run() == 1
    wt.advance(60)
    assert wt.run() == 1  # the wait times out; the workflow catches it and starts sleeping

    rec = wt.store.get(eid)
    assert rec.status == "suspended" and rec.due_at == T0 + 660  # the sleep, nothing earlier
    saved = step_of(wt, eid)
    assert saved.status == "failed"
    error = codec.decode(saved.value)
    assert isinstance(error, codec.ErrorValue)
    assert (error.name, error.code) == ("WaitTimeout", "WAIT_TIMEOUT")
    assert wt.store.waits(eid) == []  # a timed-out wait is no longer registered

    wt.put(KEY, "too late")  # the recorded timeout stands, and the put wakes nobody
    assert wt.store.get(eid).due_at == T0 + 660
    checks = count_checks(wt, monkeypatch)
    wt.advance(600)
    assert wt.run() == 1

    rec2 = wt.get(eid)
    assert rec2["status"] == "completed"
    assert rec2["outcome"]["result"] == {"timed_out": "WAIT_TIMEOUT"}
    assert checks == []  # the replay raised the recorded timeout without asking the store
    assert deliveries(wt, eid) == 3  # the wait, its timeout, the end of the sleep


def test_a_timeout_of_zero_checks_once_and_times_out_without_suspending(wt: WorkflowTest) -> None:
    eid = wt.trigger("approval", {"timeout": 0})
    assert wt.run() == 1
    assert wt.get(eid)["status"] == "failed"
    assert wt.get(eid)["outcome"]["error"]["name"] == "WaitTimeout"
    assert wt.store.waits(eid) == []

    wt.put(KEY, True)
    done = wt.trigger("approval", {"timeout": 0}, execution_id="present")
    assert wt.run() == 1
    assert wt.get(done)["outcome"]["result"] == {"approved": True}


@pytest.mark.parametrize(
    "before", [0.0, 0.5, 59.0], ids=["at-the-timeout", "just-before", "well-before"]
)
def test_a_value_that_arrives_at_or_before_the_timeout_wins(
    wt: WorkflowTest, before: float
) -> None:
    eid = wt.trigger("approval", {"timeout": 60})
    assert wt.run() == 1
    wt.advance(60 - before)
    wt.put(KEY, "in time")  # committed before the timeout's delivery runs

    assert wt.run() == 1
    rec = wt.get(eid)
    assert rec["status"] == "completed" and rec["outcome"]["result"] == {"approved": "in time"}
    wt.advance(3600)
    assert wt.run() == 0  # the timeout's wake merged into the put's: no second delivery
    assert deliveries(wt, eid) == 2


# -- newer_than -----------------------------------------------------------------------------


def test_newer_than_waits_for_a_version_above_it(wt: WorkflowTest) -> None:
    assert wt.put(KEY, "v1") == 1
    eid = wt.trigger("approval", {"newer_than": 1})
    assert wt.run() == 1
    assert wt.get(eid)["status"] == "suspended"  # version 1 is not newer than 1

    assert wt.put(KEY, "v2") == 2
    assert wt.run() == 1
    assert wt.get(eid)["outcome"]["result"] == {"approved": "v2"}

    newer = wt.trigger("approval", {"newer_than": 1}, execution_id="newer")
    assert wt.run() == 1
    assert wt.get(newer)["outcome"]["result"] == {"approved": "v2"}  # 2 > 1: at once

    ahead = wt.trigger("approval", {"newer_than": 5}, execution_id="ahead")
    assert wt.run() == 1
    for version in (3, 4, 5):
        assert wt.put(KEY, f"v{version}") == version
        wt.run()  # (whether or not an unsatisfying put wakes it, it must not return early)
        assert wt.get(ahead)["status"] == "suspended"
        assert step_of(wt, "ahead").status == "waiting"
    assert wt.put(KEY, "v6") == 6
    assert wt.run() == 1
    assert wt.get(ahead)["outcome"]["result"] == {"approved": "v6"}


def test_a_deleted_key_counts_as_absent_and_the_next_put_is_newer(wt: WorkflowTest) -> None:
    wt.put(KEY, "old")
    assert wt.store.value_delete(KEY) is True  # version 2, deleted
    eid = wt.trigger("approval")
    assert wt.run() == 1
    assert wt.get(eid)["status"] == "suspended"
    assert wt.put(KEY, "new") == 3
    assert wt.run() == 1
    assert wt.get(eid)["outcome"]["result"] == {"approved": "new"}


# -- registration ---------------------------------------------------------------------------


def test_the_registration_and_its_timeout_wake_are_recorded_together(wt: WorkflowTest) -> None:
    eid = wt.trigger("approval", {"timeout": 90})
    assert wt.run() == 1
    assert [(w.key, w.step_key, w.since) for w in wt.store.waits(eid)] == [(KEY, "approval", T0)]
    assert wt.store.get(eid).due_at == T0 + 90
    wake = [e for e in wt.store.events(eid) if e.kind == "wake_requested"]
    assert [e.data.due_at for e in wake] == [T0 + 90]
    assert "times out" in wake[0].data.reason
    described = wt.store.describe(eid)
    assert described.record.due_at == T0 + 90


def test_a_put_between_the_check_and_the_suspension_is_not_missed(
    wt: WorkflowTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = wt.store.value_wait
    raced: list[ValueWritten] = []

    def store_wait_then_put(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        if found is None and not raced:  # registered; the step has not recorded itself yet
            raced.append(wt.store.value_put(KEY, "raced"))
        return found

    monkeypatch.setattr(wt.store, "value_wait", store_wait_then_put)
    eid = wt.trigger("approval")

    assert wt.run() == 2  # suspended with the put's wake pending, so delivered again at once
    assert raced[0].woken == 1
    rec = wt.get(eid)
    assert rec["status"] == "completed" and rec["outcome"]["result"] == {"approved": "raced"}
