"""Failure handlers in the store (docs/design.md, "Workflow options"), per adapter: the transaction that records a
failure, or that skips a schedule slot, admits the handler's execution with it, exactly once.
Time is injected; nothing sleeps."""

from __future__ import annotations

import json
from typing import Any

from ys.contract import handler_id
from ys.outcomes import outcome_of
from ys.values import Outcome

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z, on the hour
FAILED = {
    "status": "failed",
    "error": {"name": "CardDeclined", "message": "card declined", "code": "X", "traceback": "long"},
}


def _fail(
    store: Any,
    execution_id: str,
    outcome: dict[str, Any] = FAILED,
    on_failure: str | None = "notify",
    now: float = T0,
) -> Outcome:
    [d] = store.claim_due(now=now, limit=10, lease_seconds=30)
    assert d.execution_id == execution_id
    return store.acknowledge(
        execution_id, d.token, outcome_of(outcome), now=now + 1, on_failure=on_failure
    )


def test_a_failure_admits_one_handler_with_the_failure_in_its_params(store):
    store.admit("charge", {"order": 1}, execution_id="order-1", now=T0)
    _fail(store, "order-1")
    handler = store.get("order-1.on-failure")
    assert handler is not None and handler.workflow == "notify"
    assert handler.status == "admitted" and handler.due_at is not None
    assert json.loads(handler.params_json) == {
        "execution_id": "order-1",
        "workflow": "charge",
        "attempts": 1,
        "tags": {},
        "error": {"name": "CardDeclined", "message": "card declined"},
    }
    assert handler.admitted_at == T0 + 1  # the failure's own transaction
    assert store.verify() == []


def test_a_repeated_acknowledgement_admits_no_second_handler(store):
    store.admit("charge", {}, execution_id="order-2", now=T0)
    [d] = store.claim_due(now=T0, limit=10, lease_seconds=30)
    store.acknowledge("order-2", d.token, outcome_of(FAILED), now=T0 + 1, on_failure="notify")
    store.acknowledge("order-2", d.token, outcome_of(FAILED), now=T0 + 2, on_failure="notify")
    page = store.list(workflow="notify", limit=100)
    assert [r.execution_id for r in page.items] == ["order-2.on-failure"]


def test_completion_and_cancellation_admit_no_handler(store):
    store.admit("charge", {}, execution_id="ok", now=T0)
    _fail(store, "ok", {"status": "completed", "result": 1})
    assert store.get("ok.on-failure") is None
    assert store.list(workflow="notify", limit=10).items == []


def test_a_failing_handler_admits_nothing(store):
    store.admit("charge", {}, execution_id="order-3", now=T0)
    _fail(store, "order-3")
    _fail(store, "order-3.on-failure", now=T0 + 5)
    assert store.get("order-3.on-failure").status == "failed"
    assert store.get("order-3.on-failure.on-failure") is None


def test_a_handler_id_past_256_bytes_stays_within_them_and_names_one_failure():
    a, b = "x" * 250 + "a", "x" * 250 + "b"
    assert len(handler_id(a).encode()) <= 256 and handler_id(a).endswith(".on-failure")
    assert handler_id(a) != handler_id(b)
    assert handler_id("short") == "short.on-failure"


def test_a_slot_later_than_max_late_admits_its_handler_in_the_tick(store):
    store.schedule_add("hourly", "job", "0 * * * *", tz="UTC", max_late=60.0, now=T0 - 1)
    actions = store.schedule_tick("hourly", now=T0 + 600, on_failure="notify")
    slot = "2027-01-15T08:00:00Z"
    assert [a.action for a in actions] == ["missed"]
    handler = store.get(f"hourly@{slot}.on-failure")
    assert handler is not None and handler.workflow == "notify"
    assert json.loads(handler.params_json) == {"schedule": "hourly", "slot": slot, "reason": "late"}
    assert store.get(f"hourly@{slot}") is None  # the slot itself never ran
    # the next tick plans nothing again, so no second handler
    store.schedule_tick("hourly", now=T0 + 700, on_failure="notify")
    assert len(store.list(workflow="notify", limit=10).items) == 1


def test_a_missed_slot_under_catch_up_skip_admits_its_handler(store):
    store.schedule_add("hourly", "job", "0 * * * *", tz="UTC", catch_up="skip", now=T0 - 1)
    store.schedule_tick("hourly", now=T0 + 3600 + 600, on_failure="notify")
    reasons = sorted(
        json.loads(r.params_json)["reason"] for r in store.list(workflow="notify", limit=10).items
    )
    assert reasons == ["catch_up_skip", "catch_up_skip"]


def test_a_skipped_slot_without_a_handler_admits_nothing(store):
    store.schedule_add("hourly", "job", "0 * * * *", tz="UTC", max_late=60.0, now=T0 - 1)
    store.schedule_tick("hourly", now=T0 + 600)
    assert store.list(limit=10).items == []
