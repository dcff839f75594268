"""Workflow pauses (docs/design.md, "Schedules and paused workflows"), per adapter: a paused
workflow's executions are still admitted, no claim takes them (the claim skips them in its own
transaction) and they are not due for the dispatcher; resuming makes them due again. Interval
schedules (`--every`) fire at creation + k x interval. Time is injected; nothing sleeps."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ys.contract import slot_id

T0 = 1_000_000.0
LEASE = 30.0


def claimed(store: Any, now: float) -> list[str]:
    return [d.execution_id for d in store.claim_due(now=now, limit=10, lease_seconds=LEASE)]


def test_a_paused_workflow_is_admitted_but_not_claimed_until_resumed(store):
    assert store.workflow_pause("held", True, now=T0) is False
    assert store.workflow_pause("held", True, now=T0 + 1) is True  # already: no change
    assert store.workflow_pauses() == {"held": T0}
    store.admit("held", None, execution_id="h1", now=T0)
    store.admit("free", None, execution_id="f1", now=T0)
    assert claimed(store, T0 + 1) == ["f1"]
    assert store.next_due_at() == T0 + 1 + LEASE  # only f1's lease: h1 is not due
    assert store.get("h1").status == "admitted"
    assert store.workflow_pause("held", False, now=T0 + 2) is True
    assert store.workflow_pauses() == {}
    assert store.next_due_at() == T0
    assert claimed(store, T0 + 2) == ["h1"]


def test_an_admission_claimed_at_once_is_not_when_its_workflow_is_paused(store):
    store.workflow_pause("held", True, now=T0)

    async def both() -> tuple[Any, Any]:
        return (
            await store.admit_async("held", None, execution_id="h1", now=T0, lease_seconds=LEASE),
            await store.admit_async("free", None, execution_id="f1", now=T0, lease_seconds=LEASE),
        )

    held, free = asyncio.run(both())
    assert held.started and held.delivery is None
    assert free.delivery is not None


def test_an_interval_schedule_fires_at_creation_plus_k_intervals(store):
    from ys.cron import every_rule

    s = store.schedule_add("pulse", "job", every_rule(600), tz="UTC", now=T0 + 7)
    assert s.cron == every_rule(600, T0 + 7)
    assert s.next_fire_at == T0 + 607
    actions = store.schedule_tick("pulse", now=T0 + 1207.5)
    fired = [a.execution_id for a in actions if a.action == "fired"]
    assert fired == [slot_id("pulse", T0 + 1207)]  # catch-up once: the latest slot
    assert store.schedule("pulse").next_fire_at == T0 + 1807
    # replaced (a script loaded again): the anchor stays the creation time
    store.schedule_add("pulse", "job", every_rule(600), tz="UTC", replace=True, now=T0 + 1300)
    assert store.schedule("pulse").next_fire_at == T0 + 1807


def test_set_restarts_the_cursor_so_past_slots_of_the_new_rule_never_fire(store):
    store.schedule_add("c", "job", "0 0 1 1 *", tz="UTC", now=T0)
    store.schedule_add("c", "job", "* * * * *", tz="UTC", replace=True, restart=True, now=T0 + 3600)
    actions = store.schedule_tick("c", now=T0 + 3600)
    assert not [a for a in actions if a.action == "fired"]


@pytest.mark.parametrize("bad", ["@every 0", "@every x", "@every 5 from", "@every -3"])
def test_a_bad_interval_rule_is_refused(store, bad):
    from ys.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        store.schedule_add("bad", "job", bad, tz="UTC", now=T0)
    assert store.schedules() == []
