"""Script versions in the store (docs/design.md, "Workflow options"), per adapter: an admission records the
workflow's current version (whichever path admits: one write, a group commit batch, a start),
a claim records the version its delivery runs (pinned: the admission's), and the store says
which versions live executions still need and how many run an older one."""

from __future__ import annotations

import asyncio

from ys.outcomes import outcome_of
from ys.values import StepWrite

T0 = 1_000_000.0
A, B = "a" * 64, "b" * 64


def test_an_admission_records_the_current_version_on_every_path(store_factory):
    store = store_factory(group_commit=True)
    store.set_script("job", A, now=T0)
    store.admit("job", {}, execution_id="direct", now=T0)

    async def batch() -> None:
        await asyncio.gather(
            *(store.admit_async("job", {"i": i}, execution_id=f"b{i}", now=T0) for i in range(5))
        )

    asyncio.run(batch())
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=30)
    child = store.start(d.execution_id, "kid", "job", "{}", now=T0)
    for eid in ["direct", child] + [f"b{i}" for i in range(5)]:
        assert store.get(eid).script_sha256 == A, eid
    store.admit("unknown", {}, execution_id="waits", now=T0)
    assert store.get("waits").script_sha256 is None
    assert store.verify() == []  # the record still folds from its history


def test_a_pinned_execution_runs_its_admission_version_an_unpinned_one_the_current(store):
    store.set_script("pinned", A, pin=True, now=T0)
    store.set_script("loose", A, now=T0)
    store.admit("pinned", {}, execution_id="p", now=T0)
    store.admit("loose", {}, execution_id="l", now=T0)
    store.set_script("pinned", B, pin=True, now=T0 + 1)
    store.set_script("loose", B, now=T0 + 1)
    runs = {
        d.execution_id: d.script_sha256
        for d in store.claim_due(now=T0 + 2, limit=5, lease_seconds=30)
    }
    assert runs == {"p": A, "l": B}
    deliveries = store.describe("p").deliveries
    assert [x.script_sha256 for x in deliveries] == [A]


def test_needed_versions_and_live_executions_under_an_older_one(store):
    store.set_script("job", A, now=T0)
    store.admit("job", {}, execution_id="old", now=T0)
    store.set_script("job", B, now=T0 + 1)
    store.admit("job", {}, execution_id="new", now=T0 + 1)
    assert store.stale_scripts() == {"job": 1}
    assert store.scripts_needed() == {A, B}
    [d] = [
        x for x in store.claim_due(now=T0 + 2, limit=5, lease_seconds=30) if x.execution_id == "old"
    ] or [None]
    assert d is not None
    store.acknowledge("old", d.token, outcome_of({"status": "completed", "result": 1}), now=T0 + 3)
    assert store.stale_scripts() == {}
    assert store.scripts_needed() == {B}


def test_a_script_change_wakes_only_the_executions_that_wait_for_it(store):
    store.set_script("job", A, now=T0)
    store.admit("job", {}, execution_id="sleeper", now=T0)
    store.admit("job", {}, execution_id="blocked", now=T0)
    by_id = {d.execution_id: d for d in store.claim_due(now=T0, limit=5, lease_seconds=30)}
    token = by_id["sleeper"].token
    store.save_step(
        "sleeper", token, "nap", StepWrite("sleep", "waiting", None, wake_at=T0 + 3600), now=T0
    )
    store.acknowledge("sleeper", token, outcome_of({"status": "suspended"}), now=T0)
    store.release(
        "blocked",
        by_id["blocked"].token,
        retry_at=T0 + 3600,
        reason="workflow_unavailable",
        detail="workflow job is missing",
        now=T0,
    )
    assert store.script_waits(["sleeper", "blocked"]) == {"blocked": "workflow job is missing"}
    assert store.shared_counts(now=T0).script_waiting == 1
    assert store.wake_workflow("job", now=T0 + 1) == 1
    assert store.get("blocked").due_at == T0 + 1
    assert store.get("sleeper").due_at == T0 + 3600
    assert store.script_waits(["sleeper", "blocked"]) == {}
