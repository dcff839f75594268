"""Hard timeouts, attempt caps and cancel-at-once (docs/design.md, "Workflow options"), per adapter: an
admission's deadline comes from its workflow's recorded timeout on every admission path; a
live execution past it is never claimed and fails TimeoutError in one transaction that fences
its lease and admits its failure handler; the max_attempts-th delivery ending without an
outcome fails the execution, other releases do not count; cancel at once ends it cancelled."""

from __future__ import annotations

import pytest

from ys.errors import LeaseLost
from ys.outcomes import outcome_of
from ys.values import StepWrite

T0 = 1_000_000.0
SHA = "a" * 64


def test_every_admission_path_gets_the_workflow_timeout_as_its_deadline(store):
    store.set_script("job", SHA, timeout=10, now=T0)
    store.admit("job", {}, execution_id="direct", now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=300)
    child = store.start(d.execution_id, "kid", "job", "{}", now=T0 + 1)
    store.admit("free", {}, execution_id="untimed", now=T0)  # no timeout recorded
    assert store.timed_out(now=T0 + 10.5) == [("direct", "job")]
    assert {e for e, _ in store.timed_out(now=T0 + 11)} == {"direct", child}
    assert store.next_due_at() is not None and store.next_due_at() <= T0 + 10


def test_an_execution_past_its_deadline_is_never_claimed(store):
    store.set_script("job", SHA, timeout=5, now=T0)
    store.admit("job", {}, execution_id="late", now=T0)
    assert store.claim_due(now=T0 + 6, limit=5, lease_seconds=30) == []


def test_time_out_fails_a_running_execution_fences_its_lease_and_admits_its_handler(store):
    store.set_script("job", SHA, timeout=5, now=T0)
    store.admit("job", {}, execution_id="slow", now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=300)
    assert store.time_out("slow", now=T0 + 4, on_failure="notify") is False  # not yet due
    assert store.time_out("slow", now=T0 + 5, on_failure="notify") is True
    record = store.get("slow")
    assert record.status == "failed"
    assert record.outcome["error"]["name"] == "TimeoutError"
    assert "5 s" in record.outcome["error"]["message"]
    assert store.get("slow.on-failure") is not None  # the handler, in the same transaction
    with pytest.raises(LeaseLost):
        store.renew("slow", d.token, now=T0 + 6)
    with pytest.raises(LeaseLost):
        store.save_step("slow", d.token, "s", StepWrite("run", "completed", "1"), now=T0 + 6)
    # the stale worker's outcome does not change the first one
    ack = store.acknowledge(
        "slow", d.token, outcome_of({"status": "completed", "result": 1}), now=T0 + 7
    )
    assert ack.status == "failed"
    assert store.time_out("slow", now=T0 + 8) is False  # ended: no deadline left
    assert store.timed_out(now=T0 + 100) == []
    assert store.verify() == []


def test_a_suspended_execution_past_its_deadline_fails_without_a_delivery(store):
    store.set_script("job", SHA, timeout=5, now=T0)
    store.admit("job", {}, execution_id="sleeps", now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=30)
    store.save_step(
        "sleeps", d.token, "nap", StepWrite("sleep", "waiting", None, wake_at=T0 + 3600), now=T0
    )
    store.acknowledge("sleeps", d.token, outcome_of({"status": "suspended"}), now=T0)
    assert store.timed_out(now=T0 + 5) == [("sleeps", "job")]
    assert store.time_out("sleeps", now=T0 + 5) is True
    assert store.get("sleeps").status == "failed"
    assert [e.kind for e in store.events("sleeps")].count("claimed") == 1


def _crash(store, execution_id, now, reason="worker_failed"):
    [d] = store.claim_due(now=now, limit=1, lease_seconds=30)
    return store.release(
        execution_id,
        d.token,
        retry_at=now,
        reason=reason,
        now=now,
        detail=f"exit 9 at {now}",
        max_attempts=3,
        on_failure="notify",
    )


def test_the_max_attempts_th_delivery_without_an_outcome_fails_the_execution(store):
    store.admit("job", {}, execution_id="crashy", now=T0)
    assert _crash(store, "crashy", T0 + 1) is False
    assert _crash(store, "crashy", T0 + 2) is False
    assert _crash(store, "crashy", T0 + 3) is True
    record = store.get("crashy")
    assert record.status == "failed"
    error = record.outcome["error"]
    assert error["name"] == "DeliveryAttemptsExhausted"
    assert "exit 9 at" in error["message"] and "max_attempts=3" in error["message"]
    assert store.get("crashy.on-failure") is not None
    assert store.verify() == []


def test_releases_by_daemon_stops_and_recovery_do_not_count(store):
    store.admit("job", {}, execution_id="survivor", now=T0)
    for i in range(4):
        assert _crash(store, "survivor", T0 + i, reason="daemon_stopped") is False
    store.claim_due(now=T0 + 10, limit=1, lease_seconds=60)
    store.release_held(now=T0 + 30)  # recovery
    assert _crash(store, "survivor", T0 + 40) is False
    assert _crash(store, "survivor", T0 + 41) is False
    assert store.get("survivor").status != "failed"
    assert _crash(store, "survivor", T0 + 42) is True


def test_a_lease_lost_past_its_end_counts_toward_max_attempts(store):
    """A delivery whose daemon died or froze past its lease ended without an outcome too
    (docs/design.md, "Workflow options"): the claim that sweeps it counts it."""
    store.admit("job", {}, execution_id="frozen", now=T0)
    store.claim_due(now=T0 + 10, limit=1, lease_seconds=1)  # its lease ends at T0 + 11
    assert _crash(store, "frozen", T0 + 40) is False  # whose claim sweeps it: 2 of 3
    assert _crash(store, "frozen", T0 + 41) is True
    assert store.get("frozen").outcome["error"]["name"] == "DeliveryAttemptsExhausted"


def test_cancel_at_once_ends_a_running_execution_cancelled_and_fences_its_worker(store):
    store.admit("job", {}, execution_id="run", now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=300)
    assert store.cancel("run", now=T0 + 1, at_once=True) is True
    assert store.get("run").status == "cancelled"
    with pytest.raises(LeaseLost):
        store.renew("run", d.token, now=T0 + 2)
    assert store.cancel("run", now=T0 + 3, at_once=True) is False
    assert store.verify() == []


def test_a_group_commit_batch_and_a_failure_handler_get_their_deadlines(store_factory):
    import asyncio

    store = store_factory(group_commit=True)
    store.set_script("job", SHA, timeout=10, now=T0)
    store.set_script("notify", SHA, timeout=20, now=T0)

    async def batch() -> None:
        await asyncio.gather(
            *(store.admit_async("job", {"i": i}, execution_id=f"b{i}", now=T0) for i in range(5))
        )

    asyncio.run(batch())
    assert {e for e, _ in store.timed_out(now=T0 + 10)} == {f"b{i}" for i in range(5)}
    assert store.time_out("b0", now=T0 + 10, on_failure="notify") is True
    assert ("b0.on-failure", "notify") in store.timed_out(now=T0 + 30)
