"""RFC 001's conformance tables (runtime adapter, outcomes) and RFC 002's leases, per adapter.

One test per table row, named after the row's behaviour. Not here: the SDK rows (they test the
SDK and the HTTP route) and "a store commit and its wake requests are interrupted by a crash"
(other issues cover both). Time is injected: every call passes `now=`; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support import Threads
from ys import codec
from ys.errors import ExecutionAdmissionError, LeaseLost, YsError
from ys.outcomes import outcome_of
from ys.store.base import AdmissionContext, Delivery, Parent
from ys.store.protocols import HistoryEvent
from ys.values import StepWrite

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
T0 = 1_000_000.0
LEASE = 30.0
FAR = T0 + 10_000_000
COMPLETED = {"status": "completed", "result": {"receipt": "r-1", "amount": 42}}
FAILED = {"status": "failed", "error": {"name": "CardDeclined", "message": "card 4242 declined"}}
SUSPENDED = {"status": "suspended"}


@contextmanager
def refused(code: str):
    with pytest.raises(YsError) as info:
        yield info
    assert info.value.code == code, f"expected {code}, got {info.value.code}: {info.value}"


def history(store: Any, execution_id: str) -> list[HistoryEvent]:
    return store.history(execution_id, limit=1000).items


def snapshot(store: Any, execution_id: str) -> tuple[Any, ...]:
    """Everything a refused or ignored write must leave as it was."""
    return (
        store.get(execution_id),
        history(store, execution_id),
        store.steps(execution_id),
        store.describe(execution_id).lease_expires_at,
    )


def claim(store: Any, now: float, lease: float = LEASE) -> list[Delivery]:
    return store.claim_due(now=now, limit=100, lease_seconds=lease)


def claimed_ids(store: Any, now: float, lease: float = LEASE) -> list[str]:
    return [d.execution_id for d in claim(store, now, lease)]


def claim_one(store: Any, execution_id: str, now: float, lease: float = LEASE) -> Delivery:
    deliveries = claim(store, now, lease)
    assert [d.execution_id for d in deliveries] == [execution_id]
    return deliveries[0]


def admit_and_suspend(store: Any, execution_id: str = "order-42", now: float = T0) -> None:
    """An execution whose first delivery suspended with no wake pending."""
    store.admit("charge-order", {"order": 42}, execution_id=execution_id, now=now)
    d = claim_one(store, execution_id, now)
    assert (
        store.acknowledge(execution_id, d.token, outcome_of(SUSPENDED), now=now + 1).to_json()
        == SUSPENDED
    )
    assert store.get(execution_id).due_at is None


# -- runtime-adapter table: admission -----------------------------------------------------------


@pytest.mark.parametrize("execution_id", ["order-42", "corpus/tinystories/v1", "ünïcode id ✓"])
def test_admission_keeps_unused_caller_supplied_id(store, execution_id):
    admission = store.admit("charge-order", {"order": 42}, execution_id=execution_id, now=T0)
    assert admission.execution_id == execution_id
    assert admission.started is True
    assert store.get(execution_id).execution_id == execution_id


@pytest.mark.parametrize(
    "workflow, params, if_exists",
    [
        ("charge-order", {"order": 42}, "fail"),  # the same trigger sent twice
        ("charge-order", {"order": 42, "item": 2}, "fail"),  # a new trigger reusing the ID
        ("refund-order", {"order": 42}, "fail"),
        ("charge-order", {"order": 43}, "use-existing"),
        ("refund-order", {"order": 42}, "use-existing"),
    ],
)
def test_admission_of_an_id_in_use_conflicts_and_leaves_the_record_unchanged(
    store, workflow, params, if_exists
):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    before = snapshot(store, "order-42")
    with refused("EXECUTION_ID_CONFLICT") as info:
        store.admit(workflow, params, execution_id="order-42", if_exists=if_exists, now=T0 + 5)
    assert isinstance(info.value, ExecutionAdmissionError)
    assert snapshot(store, "order-42") == before
    assert [r.execution_id for r in store.list().items] == ["order-42"]


@pytest.mark.parametrize("failure", ["failed outcome", "infrastructure error", "lease expired"])
def test_id_stays_reserved_after_its_delivery_fails(store, failure):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    if failure == "failed outcome":
        store.acknowledge("order-42", d.token, outcome_of(FAILED), now=T0 + 1)
    elif failure == "infrastructure error":
        store.release("order-42", d.token, retry_at=T0 + 5, reason="worker crashed", now=T0 + 1)
    else:
        assert store.release_expired(now=T0 + LEASE) == ["order-42"]
    before = snapshot(store, "order-42")
    with refused("EXECUTION_ID_CONFLICT"):
        store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0 + 60)
    with refused("EXECUTION_ID_CONFLICT"):
        store.admit("charge-order", {"order": 42, "item": 2}, execution_id="order-42", now=T0 + 60)
    assert snapshot(store, "order-42") == before
    assert len(store.list().items) == 1


def test_admission_without_id_returns_a_new_id_unlike_every_existing_one(store):
    seen = {
        store.admit("charge-order", {"order": n}, execution_id=f"order-{n}", now=T0).execution_id
        for n in range(3)
    }
    for n in range(40):
        admission = store.admit("charge-order", {"order": n}, now=T0 + n)
        assert admission.started is True
        assert admission.execution_id not in seen
        seen.add(admission.execution_id)
        assert store.get(admission.execution_id).params_json == codec.dumps({"order": n})
    assert {r.execution_id for r in store.list(limit=1000).items} == seen


def test_get_returns_the_admitted_workflow_params_and_context(store_factory):
    store = store_factory()
    params = {
        "order": 42,
        "items": [{"sku": "ä-1", "qty": 2}, None, True],
        "price": 12.5,
        "$ref": "escaped key",
        "big": 2**70,
        "note": "日本語",
    }
    context = {"trace_id": "abc", "tenant": {"id": 7}}
    store.admit(
        "charge-order",
        params,
        context=AdmissionContext.of(context),
        execution_id="order-42",
        now=T0,
    )
    store = store_factory.reopen(store)
    record = store.get("order-42")
    assert record.workflow == "charge-order"
    assert record.params_json == codec.dumps(params)  # exactly the canonical serialization
    assert codec.decode(record.params_json) == params
    assert codec.decode(record.context_json) == context
    # The record is read-only, as RFC 001's ReadonlyMap context is.
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.context_json = "{}"  # type: ignore[misc]


def test_the_context_is_stored_as_the_caller_gave_it(store):
    given = {"schedule": 5, "manual": False, "traceparent": TRACEPARENT, "tenant": {"id": 7}}
    context = AdmissionContext.of(given)
    assert context.traceparent == TRACEPARENT and context.schedule is None  # 5 is the caller's
    assert context.to_json() == given
    store.admit("charge-order", {}, context=context, execution_id="order-42", now=T0)
    assert store.get("order-42").context_json == codec.dumps(given)
    fired = AdmissionContext(schedule="nightly", manual=True)
    assert fired.to_json() == {"schedule": "nightly", "manual": True}
    assert AdmissionContext.of(fired.to_json()) == fired


def test_admit_and_admit_async_take_the_same_options_and_write_the_same(store):
    options = {
        "context": AdmissionContext.of({"who": "me"}),
        "parent": Parent("caller-1", "ship", detached=True),
        "tags": {"team": "a"},
        "due_at": T0 + 600,
        "now": T0,
    }
    store.admit("charge-order", {"n": 1}, execution_id="sync", **options)

    async def admit() -> Any:
        return await store.admit_async("charge-order", {"n": 1}, execution_id="async", **options)

    assert asyncio.run(admit()).started
    a, b = store.get("sync"), store.get("async")
    assert a.parent.to_json() == {"execution_id": "caller-1", "step_key": "ship", "detached": True}
    assert dataclasses.replace(b, execution_id="sync") == a
    first = [history(store, e)[0].event.data for e in ("sync", "async")]
    assert first[0] == dataclasses.replace(first[1], execution_id="sync")


def test_delivery_reads_workflow_params_and_context_from_the_record_not_the_wake(store):
    params = {"order": "marker-5f1e", "total": 99}
    store.admit(
        "charge-order",
        params,
        context=AdmissionContext.of({"tenant": "ctx-marker-9b2"}),
        execution_id="order-42",
        now=T0,
    )
    # A wake names an execution and a time: there is nothing else to pass.
    assert set(inspect.signature(store.request_wake).parameters) <= {
        "execution_id",
        "at",
        "now",
        "reason",
    }
    store.request_wake("order-42", at=T0, now=T0)
    store.request_wake("order-42", at=T0 - 5, now=T0)
    delivery = claim_one(store, "order-42", T0)
    assert not {"params", "context"} & {f.name for f in dataclasses.fields(delivery)}
    for event in history(store, "order-42")[1:]:
        text = json.dumps(event.event.data.to_json())
        assert "marker-5f1e" not in text and "ctx-marker-9b2" not in text, event
    record = store.get(delivery.execution_id)
    assert record.workflow == delivery.workflow == "charge-order"
    assert codec.decode(record.params_json) == params
    assert codec.decode(record.context_json) == {"tenant": "ctx-marker-9b2"}


class NotDurable:
    pass


@pytest.mark.parametrize(
    "params, context",
    [
        ({"amount": float("nan")}, None),
        ({"amount": float("inf")}, None),
        ({"items": {1, 2}}, None),
        ({"pair": (1, 2)}, None),
        ({1: "int key"}, None),
        ({"blob": b"bytes"}, None),
        ({"obj": NotDurable()}, None),
        ({"text": "lone \ud800 surrogate"}, None),
        ({"order": 42}, {"deadline": float("-inf")}),
    ],
    ids=["nan", "inf", "set", "tuple", "int-key", "bytes", "object", "surrogate", "context"],
)
def test_admission_refuses_a_value_that_cannot_round_trip(store, params, context):
    with refused("INVALID_EXECUTION_EVENT") as info:
        store.admit(
            "charge-order",
            params,
            context=AdmissionContext.of(context),
            execution_id="order-42",
            now=T0,
        )
    assert isinstance(info.value, ExecutionAdmissionError)
    assert store.get("order-42") is None
    assert store.list().items == []
    assert claim(store, FAR) == []
    with refused("EXECUTION_NOT_FOUND"):
        store.history("order-42")


def test_admission_makes_the_execution_admitted_and_due_immediately(store):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    record = store.get("order-42")
    assert record.status == "admitted"
    assert record.due_at == T0
    assert claimed_ids(store, T0) == ["order-42"]


def test_an_admission_due_later_is_not_claimable_before_its_time(store):
    store.admit("backup", {}, execution_id="later", now=T0, due_at=T0 + 600)
    record = store.get("later")
    assert (record.status, record.admitted_at, record.due_at) == ("admitted", T0, T0 + 600)
    assert claim(store, T0 + 599) == []
    assert history(store, "later")[0].event.data.due_at == T0 + 600
    assert store.verify() == []  # the record is the fold of its history
    assert claimed_ids(store, T0 + 600) == ["later"]


def test_an_admission_due_later_is_due_now_once_woken(store):
    store.admit("backup", {}, execution_id="later", now=T0, due_at=T0 + 600)
    assert store.request_wake("later", now=T0 + 1) == "requested"
    assert claimed_ids(store, T0 + 1) == ["later"]


def test_an_admission_due_in_the_past_is_due_at_once(store):
    store.admit("backup", {}, execution_id="past", now=T0, due_at=T0 - 600)
    assert store.get("past").due_at == T0
    assert "due_at" not in history(store, "past")[0].event.data.to_json()
    assert claimed_ids(store, T0) == ["past"]


def test_an_admission_due_later_is_not_claimed_in_its_admission(store):
    async def admit() -> Any:
        return await store.admit_async(
            "backup", {}, execution_id="later", now=T0, lease_seconds=LEASE, due_at=T0 + 600
        )

    admission = asyncio.run(admit())
    assert admission.started and admission.delivery is None
    assert store.get("later").status == "admitted"
    assert claim(store, T0 + 1) == []


@pytest.mark.parametrize("due_at", [float("nan"), float("inf")])
def test_an_admission_due_at_a_time_that_is_not_finite_is_refused_and_admits_nothing(store, due_at):
    with refused("INVALID_ARGUMENT"):
        store.admit("backup", {}, execution_id="later", now=T0, due_at=due_at)
    with refused("EXECUTION_NOT_FOUND"):
        store.history("later")


# -- runtime-adapter table: wakes ----------------------------------------------------------------


def test_two_wakes_requested_before_a_delivery_are_claimed_once(store):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    assert store.request_wake("order-42", at=T0 + 1, now=T0) == "requested"
    assert store.request_wake("order-42", now=T0 + 2) == "requested"
    d = claim_one(store, "order-42", T0 + 5)
    store.acknowledge("order-42", d.token, outcome_of(SUSPENDED), now=T0 + 6)
    # The claim covered every pending wake: nothing is left to deliver.
    assert store.get("order-42").due_at is None
    assert claim(store, FAR) == []


def test_wakes_with_different_due_times_make_the_execution_due_at_the_earliest(store):
    admit_and_suspend(store)
    for at in (T0 + 50, T0 + 20, T0 + 80):
        assert store.request_wake("order-42", at=at, now=T0 + 2) == "requested"
    assert store.get("order-42").due_at == T0 + 20
    assert claim(store, T0 + 19) == []
    assert claimed_ids(store, T0 + 20) == ["order-42"]


def test_wake_requested_during_a_delivery_is_still_due_after_its_acknowledgement(store):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    assert store.request_wake("order-42", at=T0 + 5, now=T0 + 1) == "requested"
    store.acknowledge("order-42", d.token, outcome_of(SUSPENDED), now=T0 + 2)
    assert store.get("order-42").due_at == T0 + 5
    assert claim(store, T0 + 4) == []
    assert claimed_ids(store, T0 + 5) == ["order-42"]


def test_future_wake_requested_during_a_past_due_delivery_does_not_inherit_its_due_time(store):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0 + 10)  # the admission wake is 10 s past due
    assert store.request_wake("order-42", at=T0 + 100, now=T0 + 11) == "requested"
    store.acknowledge("order-42", d.token, outcome_of(SUSPENDED), now=T0 + 12)
    assert store.get("order-42").due_at == T0 + 100
    assert claim(store, T0 + 12) == []
    assert claim(store, T0 + 99) == []
    assert claimed_ids(store, T0 + 100) == ["order-42"]


def test_wake_for_an_unknown_execution_is_not_found_and_creates_nothing(store):
    with refused("EXECUTION_NOT_FOUND"):
        store.request_wake("order-404", at=T0, now=T0)
    assert store.get("order-404") is None
    assert store.list().items == []
    assert claim(store, FAR) == []


NOT_A_TIME = pytest.mark.parametrize(
    "at",
    [float("nan"), float("inf"), float("-inf"), "soon", True],
    ids=["nan", "inf", "-inf", "str", "bool"],
)


@NOT_A_TIME
def test_wake_at_a_time_that_is_not_a_finite_number_is_refused_and_changes_nothing(store, at):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    before = snapshot(store, "order-42")
    with refused("INVALID_ARGUMENT"):
        store.request_wake("order-42", at=at, now=T0 + 1)
    assert snapshot(store, "order-42") == before
    assert store.verify() == []
    assert claimed_ids(store, T0 + 1) == ["order-42"]  # the admission wake is intact


@NOT_A_TIME
def test_step_wake_at_a_time_that_is_not_a_finite_number_is_refused_and_changes_nothing(store, at):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    before = snapshot(store, "order-42")
    with refused("INVALID_ARGUMENT"):
        store.save_step(
            "order-42",
            d.token,
            "cooldown",
            StepWrite("sleep", "waiting", None, wake_at=at),
            now=T0 + 1,
        )
    assert snapshot(store, "order-42") == before
    assert store.verify() == []


def test_claimed_delivery_is_not_claimed_again_before_its_lease_expires(store):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    claim_one(store, "order-42", T0)
    store.request_wake("order-42", at=T0 + 1, now=T0 + 1)  # due, but the delivery holds it
    assert claim(store, T0 + 1) == []
    assert claim(store, T0 + LEASE - 0.5) == []
    redelivery = claim_one(store, "order-42", T0 + LEASE)  # the redelivery timeout
    assert redelivery.attempt == 2


@pytest.mark.parametrize("how", ["claim", "recovery"])
def test_unacknowledged_delivery_keeps_its_wakes_and_is_delivered_again(store, how):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    first = claim_one(store, "order-42", T0)
    store.request_wake("order-42", at=T0 + 10, now=T0 + 5)  # requested during the delivery
    if how == "recovery":
        assert store.release_expired(now=T0 + LEASE) == ["order-42"]
        record = store.get("order-42")
        assert record.status == "admitted"  # as before the claim: no outcome was recorded
        assert record.due_at is not None and record.due_at <= T0 + LEASE
    second = claim_one(store, "order-42", T0 + LEASE)
    assert second.attempt == first.attempt + 1
    assert second.token != first.token
    assert store.get("order-42").status == "running"


@pytest.mark.parametrize("outcome", [COMPLETED, FAILED, {"status": "cancelled"}])
def test_wake_for_a_terminal_execution_is_ignored(store, outcome):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    store.request_wake("order-42", at=T0 + 100, now=T0 + 1)
    store.acknowledge("order-42", d.token, outcome_of(outcome), now=T0 + 2)
    # Reaching a terminal status cleared the wake requested during the delivery.
    assert store.get("order-42").due_at is None
    before = snapshot(store, "order-42")
    assert store.request_wake("order-42", at=T0 + 3, now=T0 + 3) == "ignored"
    assert store.request_wake("order-42", now=T0 + 4) == "ignored"
    assert snapshot(store, "order-42") == before
    assert claim(store, FAR) == []


def test_admitted_and_suspended_executions_survive_a_restart_and_are_delivered(store_factory):
    store = store_factory()
    store.admit("charge-order", {"order": 1}, execution_id="admitted-1", now=T0)
    store.admit("charge-order", {"order": 2}, execution_id="suspended-2", now=T0)
    store.admit("charge-order", {"order": 3}, execution_id="running-3", now=T0)
    store.admit("charge-order", {"order": 4}, execution_id="completed-4", now=T0)
    deliveries = {d.execution_id: d for d in claim(store, T0 + 1)}
    assert set(deliveries) == {"admitted-1", "suspended-2", "running-3", "completed-4"}
    d2 = deliveries["suspended-2"]
    store.save_step(
        "suspended-2",
        d2.token,
        "cooldown",
        StepWrite("sleep", "waiting", None, wake_at=T0 + 600),
        now=T0 + 2,
    )
    store.acknowledge("suspended-2", d2.token, outcome_of(SUSPENDED), now=T0 + 3)
    store.acknowledge(
        "completed-4", deliveries["completed-4"].token, outcome_of(COMPLETED), now=T0 + 3
    )
    store.release("admitted-1", deliveries["admitted-1"].token, retry_at=T0 + 5, now=T0 + 3)
    ids = ["admitted-1", "suspended-2", "running-3", "completed-4"]
    before = {i: snapshot(store, i) for i in ids}

    store = store_factory.reopen(store)

    assert {i: snapshot(store, i) for i in ids} == before
    assert store.verify() == []
    again = claim_one(store, "admitted-1", T0 + 5)
    store.acknowledge("admitted-1", again.token, outcome_of(COMPLETED), now=T0 + 6)
    # The delivery that was running when the runtime stopped is delivered again once its
    # lease expires; the suspended one when its timer is due; the completed one never.
    again = claim_one(store, "running-3", T0 + 1 + LEASE)
    store.acknowledge("running-3", again.token, outcome_of(COMPLETED), now=T0 + 2 + LEASE)
    assert claimed_ids(store, T0 + 599) == []
    assert claimed_ids(store, T0 + 600) == ["suspended-2"]
    assert store.get("completed-4").outcome.to_json() == COMPLETED


# -- outcome table -------------------------------------------------------------------------------


def test_suspended_acknowledgement_leaves_the_record_suspended_without_outcome(store):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    assert (
        store.acknowledge("order-42", d.token, outcome_of(SUSPENDED), now=T0 + 1).to_json()
        == SUSPENDED
    )
    record = store.get("order-42")
    assert record.status == "suspended"
    assert record.outcome is None


@pytest.mark.parametrize("result", [{"receipt": "r-1", "amount": 42}, [1, "two", None], "ok", None])
def test_completed_acknowledgement_records_the_result(store, result):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    outcome = {"status": "completed", "result": result}
    assert (
        store.acknowledge("order-42", d.token, outcome_of(outcome), now=T0 + 1).to_json() == outcome
    )
    record = store.get("order-42")
    assert record.status == "completed"
    assert record.outcome.to_json() == outcome


def test_an_outcome_s_warnings_are_kept_on_its_event_not_in_the_outcome(store):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    warned = {"status": "completed", "result": "ok", "warnings": ["a key drifts", "x" * 9000]}
    assert store.acknowledge("order-42", d.token, outcome_of(warned), now=T0 + 1).to_json() == {
        "status": "completed",
        "result": "ok",
    }
    (ended,) = [
        e for e in store.history("order-42", limit=100).items if e.event.kind == "completed"
    ]
    first, second = ended.event.data.warnings
    assert first == "a key drifts"
    assert second.startswith("xxx") and len(second) < 9000  # clipped, saying how much was cut


@pytest.mark.parametrize("warnings", ["one", [1], {"a": "b"}])
def test_warnings_that_are_not_a_list_of_text_are_refused_and_change_nothing(store, warnings):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    before = snapshot(store, "order-42")
    with refused("INVALID_ARGUMENT"):
        store.acknowledge(
            "order-42", d.token, outcome_of({"status": "suspended", "warnings": warnings})
        )
    assert snapshot(store, "order-42") == before


def test_failed_acknowledgement_keeps_the_error_name_and_message(store_factory):
    store = store_factory()
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    returned = store.acknowledge("order-42", d.token, outcome_of(FAILED), now=T0 + 1)
    assert returned.status == "failed" and returned.error is not None
    assert returned.error.name == "CardDeclined"
    assert returned.error.message == "card 4242 declined"
    # Every later read, after a restart too, returns the same recorded error.
    for restart in (False, True):
        if restart:
            store = store_factory.reopen(store)
        record = store.get("order-42")
        assert record.status == "failed"
        assert record.outcome == returned
        assert store.acknowledge("order-42", d.token, outcome_of(SUSPENDED), now=T0 + 2) == returned


@pytest.mark.parametrize(
    "first, second",
    [
        (COMPLETED, FAILED),
        (FAILED, COMPLETED),
        (COMPLETED, {"status": "completed", "result": {"receipt": "r-2"}}),
        (FAILED, {"status": "failed", "error": {"name": "Timeout", "message": "later"}}),
    ],
    ids=["completed-then-failed", "failed-then-completed", "completed-twice", "failed-twice"],
)
def test_second_terminal_acknowledgement_keeps_and_returns_the_first_outcome(store, first, second):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    recorded = store.acknowledge("order-42", d.token, outcome_of(first), now=T0 + 1)
    before = snapshot(store, "order-42")
    assert store.acknowledge("order-42", d.token, outcome_of(second), now=T0 + 2) == recorded
    assert snapshot(store, "order-42") == before
    assert store.get("order-42").outcome == recorded


@pytest.mark.parametrize("first", [COMPLETED, FAILED])
def test_suspended_acknowledgement_after_a_terminal_one_keeps_the_terminal_outcome(store, first):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    recorded = store.acknowledge("order-42", d.token, outcome_of(first), now=T0 + 1)
    before = snapshot(store, "order-42")
    assert store.acknowledge("order-42", d.token, outcome_of(SUSPENDED), now=T0 + 2) == recorded
    assert snapshot(store, "order-42") == before
    assert store.get("order-42").status == first["status"]


def test_terminal_execution_delivered_again_returns_the_recorded_outcome(store):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    store.acknowledge("order-42", d.token, outcome_of(COMPLETED), now=T0 + 1)
    before = snapshot(store, "order-42")
    # Nothing can hand the execution to a worker again: no wake, no claim, no recovery ...
    assert store.request_wake("order-42", now=T0 + 2) == "ignored"
    assert claim(store, FAR) == []
    assert store.release_expired(now=FAR) == []
    # ... and a late report from any delivery gets the recorded outcome back.
    assert (
        store.acknowledge("order-42", d.token, outcome_of(SUSPENDED), now=T0 + 3).to_json()
        == COMPLETED
    )
    assert snapshot(store, "order-42") == before


@pytest.mark.parametrize("prior", ["admitted", "suspended"])
def test_infrastructure_error_keeps_the_status_and_delivers_again(store, prior):
    if prior == "admitted":
        store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    else:
        admit_and_suspend(store)
        store.request_wake("order-42", at=T0 + 2, now=T0 + 2)
    first = claim_one(store, "order-42", T0 + 2)
    store.release("order-42", first.token, retry_at=T0 + 10, reason="spawn failed", now=T0 + 3)
    record = store.get("order-42")
    assert record.status == prior
    assert record.outcome is None
    assert claim(store, T0 + 9) == []
    again = claim_one(store, "order-42", T0 + 10)
    assert again.attempt == first.attempt + 1


# -- leases (RFC 002 as README.md states it) ----------------------------------------------------


def test_renewal_extends_the_lease(store):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    store.admit("charge-order", {"order": 43}, execution_id="order-43", now=T0)
    d = {x.execution_id: x for x in claim(store, T0)}
    assert store.renew("order-42", d["order-42"].token, now=T0 + 20, lease_seconds=LEASE) == (
        T0 + 20 + LEASE
    )
    assert store.describe("order-42").lease_expires_at == T0 + 20 + LEASE
    # Only the execution that did not renew is delivered again at the first expiry.
    assert claimed_ids(store, T0 + LEASE) == ["order-43"]
    assert claimed_ids(store, T0 + 20 + LEASE - 1) == []
    ack = store.acknowledge(
        "order-42", d["order-42"].token, outcome_of(COMPLETED), now=T0 + 20 + LEASE - 1
    )
    assert ack.to_json() == COMPLETED


def test_expired_lease_cannot_be_renewed(store):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    before = snapshot(store, "order-42")
    with refused("LEASE_LOST") as info:
        store.renew("order-42", d.token, now=T0 + LEASE, lease_seconds=LEASE)
    assert isinstance(info.value, LeaseLost)
    assert snapshot(store, "order-42") == before
    assert claimed_ids(store, T0 + LEASE) == ["order-42"]


def _stale_write(store: Any, op: str, token: str, now: float) -> None:
    if op == "acknowledge-suspended":
        store.acknowledge("order-42", token, outcome_of(SUSPENDED), now=now)
    elif op == "acknowledge-completed":
        store.acknowledge("order-42", token, outcome_of(COMPLETED), now=now)
    elif op == "acknowledge-failed":
        store.acknowledge("order-42", token, outcome_of(FAILED), now=now)
    elif op == "save_step":
        store.save_step(
            "order-42",
            token,
            "charge",
            StepWrite("run", "completed", codec.dumps({"receipt": "stale"}), wake_at=now + 5),
            now=now,
        )
    elif op == "renew":
        store.renew("order-42", token, now=now, lease_seconds=LEASE)
    elif op == "release":
        store.release("order-42", token, retry_at=now, now=now)
    else:
        raise AssertionError(op)


STALE_WRITES = [
    "acknowledge-suspended",
    "acknowledge-completed",
    "acknowledge-failed",
    "save_step",
    "renew",
    "release",
]


@pytest.mark.parametrize("op", STALE_WRITES)
@pytest.mark.parametrize("staleness", ["redelivered", "expired", "never issued"])
def test_stale_token_is_refused_and_writes_nothing(store, op, staleness):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    first = claim_one(store, "order-42", T0)
    store.save_step(
        "order-42",
        first.token,
        "load",
        StepWrite("run", "completed", codec.dumps({"id": 42})),
        now=T0 + 1,
    )
    current = None
    if staleness == "redelivered":
        current = claim_one(store, "order-42", T0 + LEASE)
        token, now = first.token, T0 + LEASE + 1
    elif staleness == "expired":
        token, now = first.token, T0 + LEASE
    else:
        token, now = "0" * 32, T0 + 2
    before = snapshot(store, "order-42")
    with refused("LEASE_LOST"):
        _stale_write(store, op, token, now)
    assert snapshot(store, "order-42") == before
    if current is not None:  # the live delivery is untouched and still owns the execution
        assert (
            store.acknowledge(
                "order-42", current.token, outcome_of(COMPLETED), now=now + 1
            ).to_json()
            == COMPLETED
        )


def test_live_token_writes_steps_and_their_wakes(store):
    """The positive control of the stale-token test: the same writes with the live token."""
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    store.save_step(
        "order-42",
        d.token,
        "cooldown",
        StepWrite("sleep", "waiting", None, wake_at=T0 + 600),
        now=T0 + 1,
    )
    assert [(s.key, s.status, s.wake_at) for s in store.steps("order-42")] == [
        ("cooldown", "waiting", T0 + 600)
    ]
    store.acknowledge("order-42", d.token, outcome_of(SUSPENDED), now=T0 + 2)
    assert store.get("order-42").due_at == T0 + 600


def test_a_finished_sleep_then_a_new_sleep_leaves_only_the_new_wake_pending(store):
    """A woken delivery completes its sleep (the step keeps the wake it waited for) and starts
    the next one: the execution is due at the new sleep's wake, not again at once, so three
    sleeps in a row cost four deliveries, not six."""
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    for key, wake in (("a", T0 + 10), ("b", T0 + 20)):
        store.save_step(
            "order-42",
            d.token,
            key,
            StepWrite("sleep", "waiting", None, wake_at=wake),
            now=wake - 10,
        )
        store.acknowledge("order-42", d.token, outcome_of(SUSPENDED), now=wake - 10)
        assert store.get("order-42").due_at == wake
        assert claim(store, wake - 1) == []
        d = claim_one(store, "order-42", wake)
        store.save_step(
            "order-42", d.token, key, StepWrite("sleep", "completed", None, wake_at=wake), now=wake
        )
    store.save_step(
        "order-42", d.token, "c", StepWrite("sleep", "waiting", None, wake_at=T0 + 30), now=T0 + 20
    )
    store.acknowledge("order-42", d.token, outcome_of(SUSPENDED), now=T0 + 20)
    assert store.get("order-42").due_at == T0 + 30
    assert claim(store, T0 + 20) == []


def test_a_completed_step_is_final_and_a_later_save_of_it_changes_nothing(store):
    """The daemon records a step's timeout while the step's own save may just have committed
    : the completed result stands, and the history gains no second record of it."""
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    store.save_step("order-42", d.token, "charge", StepWrite("run", "completed", "1"), now=T0 + 1)
    length = store.get("order-42").history_length
    store.save_step(
        "order-42",
        d.token,
        "charge",
        StepWrite("run", "failed", '{"__ys__":"error","name":"StepTimeout","message":"late"}'),
        now=T0 + 2,
    )
    assert [(s.key, s.status, s.value) for s in store.steps("order-42")] == [
        ("charge", "completed", "1")
    ]
    assert store.get("order-42").history_length == length


@pytest.mark.parametrize(
    "wake_during, due_after",
    [(None, T0 + 2 + LEASE), (T0 + 10, T0 + 10), (T0 + 100, T0 + 2 + LEASE)],
    ids=["covered-wake", "earlier-wake-during", "later-wake-during"],
)
def test_expired_lease_makes_the_execution_due_again_with_its_wakes_pending(
    store, wake_during, due_after
):
    admit_and_suspend(store)
    store.request_wake("order-42", at=T0 + 2, now=T0 + 2)
    first = claim_one(store, "order-42", T0 + 2)
    if wake_during is not None:
        store.request_wake("order-42", at=wake_during, now=T0 + 3)
    # At expiry the covered wake is pending again (due now), merged with any later request.
    assert store.release_expired(now=T0 + 2 + LEASE) == ["order-42"]
    record = store.get("order-42")
    assert record.status == "suspended"
    assert record.due_at == due_after
    again = claim_one(store, "order-42", T0 + 2 + LEASE)
    assert again.attempt == first.attempt + 1


def test_claim_with_a_limit_hands_out_the_earliest_due_first(store):
    for n, at in enumerate([T0 + 1, T0 + 5, T0 + 3]):  # neither ID order nor its reverse
        admit_and_suspend(store, f"order-{n}")
        store.request_wake(f"order-{n}", at=at, now=T0 + 1)
    assert sorted(d.execution_id for d in store.claim_due(now=T0 + 10, limit=2)) == [
        "order-0",
        "order-2",
    ]
    assert [d.execution_id for d in store.claim_due(now=T0 + 10, limit=2)] == ["order-1"]


def test_concurrent_claimers_get_each_due_execution_once(store_factory):
    """Two stores on one database (two daemons), eight threads each, released together."""
    stores = [store_factory(), store_factory()]
    ids = {f"order-{n}" for n in range(8)}
    for execution_id in sorted(ids):
        stores[0].admit("charge-order", execution_id=execution_id, now=T0)
    claimed: list[list[Delivery]] = Threads(
        16, lambda i: stores[i % 2].claim_due(now=T0, limit=3, lease_seconds=LEASE)
    ).results()
    delivered = sorted(d.execution_id for batch in claimed for d in batch)
    assert len(claimed) == 16
    assert delivered == sorted(ids)  # every due execution once, none twice
    assert all(r.status == "running" for r in stores[1].list(limit=100).items)


@pytest.mark.parametrize(
    "error",
    [
        {"name": "E", "message": "m", "code": 5},
        {"name": "E", "message": "m", "traceback": ["not", "text"]},
        {"name": "E", "message": "m", "cause": float("nan")},
        {"name": "E", "message": "m", "cause": {"deep": [float("inf")]}},
    ],
)
def test_a_failed_outcome_whose_error_fields_are_not_durable_is_refused_and_changes_nothing(
    store, error
):
    store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0)
    d = claim_one(store, "order-42", T0)
    before = snapshot(store, "order-42")
    with refused("INVALID_ARGUMENT"):
        store.acknowledge(
            "order-42", d.token, outcome_of({"status": "failed", "error": error}), now=T0 + 1
        )
    assert snapshot(store, "order-42") == before
    assert store.verify() == []


def test_a_shell_steps_failed_attempt_keeps_its_error_beside_its_output(store):
    """`ys step run` records a failed attempt as {"error", "status", "stdout"}: its history
    keeps the error, as for a Python step's; a completed value holding "error" is no error."""
    store.admit("backup", {}, execution_id="sh-1", now=T0)
    d = claim_one(store, "sh-1", T0 + 1)
    error = codec.ErrorValue("ExitStatus", "exit status 3", "EXIT_STATUS")
    failed = codec.dumps({"error": error, "status": 3, "stdout": "partial\n"})
    store.save_step("sh-1", d.token, "dump", StepWrite("run", "waiting", failed, attempts=1, wake_at=T0 + 5), now=T0 + 2)  # fmt: skip
    done = codec.dumps({"error": error, "status": 0, "stdout": ""})
    store.save_step("sh-1", d.token, "dump", StepWrite("run", "completed", done, attempts=2), now=T0 + 3)  # fmt: skip
    attempts = store.describe("sh-1").failed_attempts["dump"]
    assert [(a.attempt, a.error) for a in attempts] == [(1, error.to_json())]
