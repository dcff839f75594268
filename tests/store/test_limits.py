"""Hard timeouts, attempt caps and cancel-at-once (docs/design.md, "Workflow options"), per adapter: an
admission's deadline comes from its workflow's recorded timeout on every admission path; a
live execution past it is never claimed and fails TimeoutError in one transaction that fences
its lease and admits its failure handler; the max_attempts-th delivery ending without an
outcome fails the execution, other releases do not count; cancel at once ends it cancelled."""

from __future__ import annotations

import pytest

from ys.errors import LeaseLost
from ys.outcomes import outcome_of
from ys.store.base import ScriptOptions
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
    assert record.outcome.error.name == "TimeoutError"
    assert "5 s" in record.outcome.error.message
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


def test_the_recorded_handler_wins_over_the_daemons_copy(store):
    """The options are the database's (docs/design.md): its cap and its handler both come
    first, the daemon's copy only where none is recorded."""
    store.set_script("job", SHA, now=T0, options=ScriptOptions(max_attempts=1, on_failure="db"))
    store.admit("job", {}, execution_id="crashy", now=T0)
    assert _crash(store, "crashy", T0 + 1) is True  # the recorded cap of 1, not the daemon's 3
    assert store.get("crashy.on-failure").workflow == "db"


def test_the_max_attempts_th_delivery_without_an_outcome_fails_the_execution(store):
    store.admit("job", {}, execution_id="crashy", now=T0)
    assert _crash(store, "crashy", T0 + 1) is False
    assert _crash(store, "crashy", T0 + 2) is False
    assert _crash(store, "crashy", T0 + 3) is True
    record = store.get("crashy")
    assert record.status == "failed"
    error = record.outcome.error.to_json()
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
    assert store.get("frozen").outcome.error.name == "DeliveryAttemptsExhausted"


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


# -- limits and attempts that hold across daemons: recorded with the script, in the database --


def test_a_slot_of_an_execution_cancelled_at_once_is_held_until_its_worker_is_gone(store):
    store.set_script("job", SHA, now=T0, options=ScriptOptions(concurrency=1))
    store.admit("job", {}, execution_id="a", now=T0)
    store.admit("job", {}, execution_id="b", now=T0)
    [d] = store.claim_due(now=T0, limit=2, lease_seconds=30)
    assert d.execution_id == "a"
    assert store.cancel("a", now=T0 + 1, at_once=True)
    assert store.get("a").status == "cancelled"
    # its worker may still run (being killed): the group stays full, whoever claims
    assert store.claim_due(now=T0 + 2, limit=2, lease_seconds=30) == []
    assert store.slot_waits(["b"]) == {"b": "*"}
    assert store.free_slot("a") is True  # its daemon saw the worker exit
    assert store.free_slot("a") is False
    [d] = store.claim_due(now=T0 + 3, limit=2, lease_seconds=30)
    assert d.execution_id == "b"
    assert store.verify() == []


def test_recovery_frees_the_slots_its_own_workers_kept(store):
    """Recovery at start runs once its workers are known gone: a slot kept by an execution
    cancelled at once frees then, not at its lease's end."""
    store.set_script("job", SHA, now=T0, options=ScriptOptions(concurrency=1))
    store.admit("job", {}, execution_id="a", now=T0)
    store.admit("job", {}, execution_id="b", now=T0)
    [d] = store.claim_due(now=T0, limit=2, lease_seconds=30)
    assert store.cancel("a", now=T0 + 1, at_once=True)
    assert store.claim_due(now=T0 + 2, limit=2, lease_seconds=30) == []
    store.release_held(now=T0 + 3)  # its daemon restarted (its workers killed)
    [d] = store.claim_due(now=T0 + 4, limit=2, lease_seconds=30)
    assert d.execution_id == "b"
    assert store.free_slot("a") is False  # freed once
    assert store.verify() == []


def test_a_slot_of_a_timed_out_execution_frees_at_its_lease_end_if_no_daemon_says_so(store):
    store.set_script("job", SHA, timeout=5, now=T0, options=ScriptOptions(concurrency=1))
    store.admit("job", {}, execution_id="a", now=T0)
    store.set_script("job", SHA, now=T0, options=ScriptOptions(concurrency=1))
    store.admit("job", {}, execution_id="b", now=T0)
    [d] = store.claim_due(now=T0, limit=2, lease_seconds=30)
    assert store.time_out("a", now=T0 + 5) is True
    assert store.claim_due(now=T0 + 6, limit=2, lease_seconds=30) == []
    assert store.claim_due(now=T0 + 29, limit=2, lease_seconds=30) == []
    # its daemon never said its worker is gone (dead, frozen): the lease's end frees it
    [d] = store.claim_due(now=T0 + 31, limit=2, lease_seconds=30)
    assert d.execution_id == "b"


def test_the_limit_recorded_with_the_script_binds_every_store_on_the_database(store_factory):
    one, two = store_factory(), store_factory()
    one.set_script("job", SHA, now=T0, options=ScriptOptions(concurrency=1))
    for i in range(3):
        one.admit("job", {}, execution_id=f"j{i}", now=T0)
    assert len(one.claim_due(now=T0, limit=3, lease_seconds=30)) == 1
    assert two.claim_due(now=T0, limit=3, lease_seconds=30) == []  # no limit of its own
    # the newest recorded script's limit applies to the executions already waiting
    two.set_script("job", "b" * 64, now=T0 + 1, options=ScriptOptions(concurrency=3))
    assert two.wake_workflow("job", now=T0 + 1) == 2
    assert len(two.claim_due(now=T0 + 1, limit=3, lease_seconds=30)) == 2


def test_lost_leases_swept_by_a_claim_count_and_the_last_fails_the_execution(store):
    options = ScriptOptions(max_attempts=2, on_failure="notify")
    store.set_script("job", SHA, now=T0, options=options)
    store.admit("job", {}, execution_id="lost", now=T0)
    [d1] = store.claim_due(now=T0, limit=1, lease_seconds=1)
    second = store.claim_due(now=T0 + 5, limit=1, lease_seconds=1)  # the first lease: counted
    [d2] = second
    assert d2.attempt == 2 and second.ended == ()  # released, not ended
    # the second lease lost is the last: the claim that sweeps it takes only its handler
    got = store.claim_due(now=T0 + 10, limit=1, lease_seconds=1)
    assert [d.execution_id for d in got] == ["lost.on-failure"]
    assert got.ended == ("lost",)  # what it ended, for its daemon to tell the waiters
    record = store.get("lost")
    assert record.status == "failed"
    assert record.outcome.error.name == "DeliveryAttemptsExhausted"
    assert "max_attempts=2" in record.outcome.error.message
    assert store.get("lost.on-failure") is not None  # its handler, as the daemon's cap admits
    with pytest.raises(LeaseLost):
        store.save_step("lost", d1.token, "s", StepWrite("run", "completed", "1"), now=T0 + 11)
    assert store.verify() == []


def test_a_step_deadline_stored_with_the_lease_is_recorded_by_the_sweep(store):
    store.set_script("job", SHA, now=T0, options=ScriptOptions(max_attempts=1))
    store.admit("job", {}, execution_id="stuck", now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=30)
    store.save_step("stuck", d.token, "before", StepWrite("run", "completed", "1"), now=T0)
    expires = store.step_deadline(
        "stuck", d.token, "slow", timeout=2, attempts=1, now=T0 + 1, lease_seconds=5
    )
    assert expires == T0 + 6  # it renews the lease too
    # its daemon dies: the next claim past the lease records the attempt as the daemon would
    [again] = store.claim_due(now=T0 + 7, limit=1, lease_seconds=30)
    assert again.attempt == 2
    steps = {s.key: s for s in store.steps("stuck")}
    assert steps["slow"].status == "failed"
    assert "StepTimeout" in steps["slow"].value
    assert steps["before"].status == "completed"
    assert {s.key: s.status for s in again.state.steps} == {"before": "completed", "slow": "failed"}
    # a step killed for its timeout is not a delivery without an outcome: max_attempts=1 holds
    assert store.get("stuck").status == "running"
    with pytest.raises(LeaseLost):
        store.step_deadline("stuck", d.token, "slow", timeout=2, attempts=1, now=T0 + 8)


def test_recovery_at_start_records_an_overdue_step_as_the_sweep_does(store):
    """A daemon restarted past its step's stored limit (docs/design.md, "Step deadlines are
    stored"): its recovery records the attempt; one whose limit has not passed runs again."""
    for eid in ("overdue", "early"):
        store.admit("job", {}, execution_id=eid, now=T0)
    ds = {d.execution_id: d for d in store.claim_due(now=T0, limit=2, lease_seconds=30)}
    store.step_deadline("overdue", ds["overdue"].token, "s", timeout=2, attempts=1, now=T0)
    store.step_deadline("early", ds["early"].token, "s", timeout=50, attempts=1, now=T0)
    assert sorted(store.release_held(now=T0 + 5)) == ["early", "overdue"]
    [step] = store.steps("overdue")
    assert step.status == "failed" and "StepTimeout" in (step.value or "")
    assert store.steps("early") == []
    assert not store.get("overdue").terminal  # released, due again
    # the deadline went with the lease: the next sweep records nothing more
    again = {d.execution_id: d for d in store.claim_due(now=T0 + 6, limit=2, lease_seconds=5)}
    assert set(again) == {"overdue", "early"}
    store.release_expired(now=T0 + 20)
    assert [s.status for s in store.steps("overdue")] == ["failed"]
    assert store.steps("early") == []
    assert store.verify() == []


def test_a_step_with_a_retry_waits_for_it_and_a_completed_one_is_left_alone(store):
    for eid in ("retry", "done"):
        store.admit("job", {}, execution_id=eid, now=T0)
    ds = {d.execution_id: d for d in store.claim_due(now=T0, limit=2, lease_seconds=5)}
    store.step_deadline(
        "retry",
        ds["retry"].token,
        "s",
        timeout=1,
        attempts=1,
        retry_delay=10,
        now=T0,
        lease_seconds=5,
    )
    store.step_deadline(
        "done", ds["done"].token, "s", timeout=1, attempts=1, now=T0, lease_seconds=5
    )
    store.save_step("done", ds["done"].token, "s", StepWrite("run", "completed", "1"), now=T0)
    store.release_expired(now=T0 + 6)
    [retry] = store.steps("retry")
    assert (retry.status, retry.wake_at) == ("waiting", T0 + 16)
    [done] = store.steps("done")
    assert done.status == "completed"
    assert store.get("retry").due_at == T0 + 16


def test_a_stored_step_deadline_leaves_a_step_that_ended_after_it_alone(store):
    """A step saved after its announcement (failed and caught by the workflow, or recorded by
    its daemon's timer) ended that attempt: the sweep past the deadline changes nothing."""
    for eid in ("caught", "timer"):
        store.admit("job", {}, execution_id=eid, now=T0)
    ds = {d.execution_id: d for d in store.claim_due(now=T0, limit=2, lease_seconds=5)}
    for eid, d in ds.items():
        store.step_deadline(eid, d.token, "s", timeout=1, attempts=1, now=T0, lease_seconds=5)
    mine = '{"name":"ValueError","message":"mine"}'
    store.save_step("caught", ds["caught"].token, "s", StepWrite("run", "failed", mine), now=T0)
    timer = StepWrite("run", "waiting", '{"name":"StepTimeout"}', attempts=1, wake_at=T0 + 50)
    store.save_step("timer", ds["timer"].token, "s", timer, now=T0 + 1)
    store.release_expired(now=T0 + 6)
    [caught] = store.steps("caught")
    assert (caught.status, caught.value) == ("failed", mine)
    [timed] = store.steps("timer")
    assert (timed.status, timed.attempts, timed.wake_at) == ("waiting", 1, T0 + 50)
    for eid in ds:
        steps = [e for e in store.events(eid) if e.kind == "step"]
        assert len(steps) == 1  # recorded once
    assert store.verify() == []
