"""The counts the metrics read (docs/design.md, "Workflow options", `GET /v1/metrics`), per adapter: executions by
workflow and status, effects by status and due executions follow every write path (a batch
of admissions, claims, outcomes, gc) in the write's own transaction, without a scan."""

from __future__ import annotations

import asyncio

from ys.outcomes import outcome_of
from ys.store.base import Delivery

T0 = 1_000_000.0
FAILED = {"status": "failed", "error": {"name": "E", "message": "m"}}


def counts(store, now=T0 + 100):
    return store.shared_counts(now=now)


def test_executions_by_workflow_and_status_follow_admission_delivery_and_gc(store):
    for i in range(3):
        store.admit("a", {}, execution_id=f"a-{i}", now=T0)
    store.admit("b", {}, execution_id="b-0", now=T0 + 1)
    assert counts(store).executions == {("a", "admitted"): 3, ("b", "admitted"): 1}
    deliveries: list[Delivery] = store.claim_due(now=T0 + 2, limit=2, lease_seconds=30)
    assert counts(store).executions == {
        ("a", "admitted"): 1,
        ("a", "running"): 2,
        ("b", "admitted"): 1,
    }
    first, second = deliveries
    store.acknowledge(
        first.execution_id,
        first.token,
        outcome_of({"status": "completed", "result": 1}),
        now=T0 + 3,
    )
    store.acknowledge(second.execution_id, second.token, outcome_of(FAILED), now=T0 + 3)
    assert counts(store).executions == {
        ("a", "admitted"): 1,
        ("a", "completed"): 1,
        ("a", "failed"): 1,
        ("b", "admitted"): 1,
    }
    store.gc(0, now=T0 + 10)
    assert counts(store).executions == {("a", "admitted"): 1, ("b", "admitted"): 1}


def test_admissions_committed_together_by_the_group_writer_are_counted(store_factory):
    store = store_factory(group_commit=True)

    async def admit_many() -> None:
        await asyncio.gather(*(store.admit_async("g", {"i": i}, now=T0) for i in range(50)))

    asyncio.run(admit_many())
    assert counts(store).executions == {("g", "admitted"): 50}


def test_due_executions_and_the_oldest_due_time(store):
    store.admit("a", {}, execution_id="early", now=T0)
    store.admit("a", {}, execution_id="late", now=T0 + 50)
    store.admit("a", {}, execution_id="future", now=T0 + 500)
    c = counts(store, now=T0 + 100)
    assert (c.due, c.oldest_due_at) == (2, T0)
    store.claim_due(now=T0 + 100, limit=1, lease_seconds=30)  # a leased one is not due
    c = counts(store, now=T0 + 100)
    assert (c.due, c.oldest_due_at) == (1, T0 + 50)


def test_effects_by_status(store):
    store.admit("a", {}, execution_id="pay", now=T0)
    store.effect_begin("charge.v1", "fx-1", {"n": 1}, "pay", "charge", now=T0)
    store.effect_begin("charge.v1", "fx-2", {"n": 2}, "pay", "charge2", now=T0)
    assert counts(store).effects == {"pending": 2}
    store.effect_settle("charge.v1", "fx-1", '"ok"', now=T0 + 1)
    assert counts(store).effects == {"pending": 1, "settled": 1}
