"""The retry client (`ys retry`), per adapter: one transaction admits the retry and
copies the original's steps before the retry point with what their replay looks up (start
requests, effect beginnings); the original never changes. Time is injected; nothing sleeps."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from tests.store.test_execution_client import T0, claim, claim_one, refused
from ys import codec
from ys.outcomes import outcome_of
from ys.values import StepWrite

FAILED = {"status": "failed", "error": {"name": "Boom", "message": "step d broke"}}
OP, EID = "charge", "pay-order-7"


def failed_at_fourth_step(store: Any, execution_id: str = "order-7", tags=None) -> None:
    """An execution that recorded a run step, a start, a settled effect, then failed at `d`."""
    store.admit("charge-order", {"order": 7}, execution_id=execution_id, now=T0, tags=tags)
    d = claim_one(store, execution_id, T0)
    store.save_step(execution_id, d.token, "a", StepWrite("run", "completed", "1"), now=T0 + 1)
    child = store.start(execution_id, "b", "ship", '{"order":7}', now=T0 + 2)
    info = {"execution_id": child, "workflow": "ship", "params": '{"order":7}'}
    store.save_step(
        execution_id, d.token, "b", StepWrite("start", "completed", codec.dumps(info)), now=T0 + 2
    )
    store.effect_begin(OP, EID, {"amount": 5}, execution_id, "c", now=T0 + 3)
    store.effect_settle(OP, EID, '{"receipt":"r-1"}', now=T0 + 3)
    store.save_step(
        execution_id,
        d.token,
        "c",
        StepWrite("effect", "completed", '{"receipt":"r-1"}'),
        now=T0 + 3,
    )
    error = codec.dumps(codec.ErrorValue("Boom", "step d broke"))
    store.save_step(execution_id, d.token, "d", StepWrite("run", "failed", error), now=T0 + 4)
    store.acknowledge(execution_id, d.token, outcome_of(FAILED), now=T0 + 5)


def test_a_retry_copies_the_steps_before_the_first_that_did_not_complete(store):
    failed_at_fourth_step(store)
    before = (store.get("order-7"), store.steps("order-7"), store.history("order-7", 1000).items)
    retry = store.retry("order-7", now=T0 + 10)
    assert (retry.execution_id, retry.retry_of, retry.copied_steps) == (
        "order-7.r1",
        "order-7",
        ["a", "b", "c"],
    )
    record = store.get("order-7.r1")
    assert record.retry_of == "order-7" and record.status == "admitted"
    assert record.workflow == "charge-order" and json.loads(record.params_json) == {"order": 7}
    assert record.due_at == T0 + 10 and record.parent is None
    copied = store.steps("order-7.r1")
    assert [(s.key, s.kind, s.status, s.value) for s in copied] == [
        (s.key, s.kind, s.status, s.value) for s in store.steps("order-7")[:3]
    ]
    events = store.history("order-7.r1", 1000).items
    assert [e.event.kind for e in events] == ["admitted", "step", "step", "step"]
    assert events[0].event.data.retry_of == "order-7"
    assert all(e.event.data.copied_from == "order-7" for e in events[1:])
    # the original is unchanged but for its link to the retry, and every record is its folded
    # history
    after = (store.get("order-7"), store.steps("order-7"), store.history("order-7", 1000).items)
    assert after == (dataclasses.replace(before[0], retried_by="order-7.r1"), *before[1:])
    assert store.get("order-7").retry_of is None
    assert store.verify() == []


def test_a_retried_start_step_finds_its_child_and_a_settled_effect_its_result(store):
    failed_at_fourth_step(store)
    child_id = codec.decode(store.steps("order-7")[1].value)["execution_id"]
    store.retry("order-7", now=T0 + 10)
    # the start request was copied: the retry's replay starts no second child
    assert store.start("order-7.r1", "b", "ship", '{"order":7}', now=T0 + 11) == child_id
    assert len(store.list(workflow="ship").items) == 1
    with refused("START_REQUEST_MISMATCH"):
        store.start("order-7.r1", "b", "ship", '{"order":8}', now=T0 + 11)
    # the effect ledger names the retry as a beginner; beginning again finds it settled
    began = [b.execution_id for b in store.effect(EID).began_by]
    assert sorted(began) == ["order-7", "order-7.r1"]
    again = store.effect_begin(OP, EID, {"amount": 5}, "order-7.r1", "c", now=T0 + 12)
    assert again.status == "settled"


def test_retry_from_a_step_copies_the_steps_before_it_and_from_the_first_none(store):
    failed_at_fourth_step(store)
    assert store.retry("order-7", from_step="c", now=T0 + 10).copied_steps == ["a", "b"]
    first = store.retry("order-7", from_step="a", now=T0 + 11)
    assert (first.execution_id, first.copied_steps) == ("order-7.r2", [])
    assert store.steps("order-7.r2") == []
    assert [e.event.kind for e in store.history("order-7.r2", 1000).items] == ["admitted"]


def test_an_unknown_from_step_is_invalid_and_admits_nothing(store):
    failed_at_fourth_step(store)
    with refused("INVALID_ARGUMENT"):
        store.retry("order-7", from_step="nope", now=T0 + 10)
    assert store.get("order-7.r1") is None


def test_only_a_terminal_execution_can_be_retried(store):
    store.admit("charge-order", {"order": 1}, execution_id="live", now=T0)
    with refused("EXECUTION_NOT_TERMINAL") as info:
        store.retry("live", now=T0 + 1)
    assert info.value.exit_code == 3
    claim_one(store, "live", T0 + 1)
    with refused("EXECUTION_NOT_TERMINAL"):
        store.retry("live", now=T0 + 2)
    with refused("EXECUTION_NOT_FOUND"):
        store.retry("nobody", now=T0 + 2)
    assert [r.execution_id for r in store.list().items] == ["live"]


def test_retry_ids_take_the_first_free_number_or_the_given_id(store):
    failed_at_fourth_step(store)
    assert store.retry("order-7", now=T0 + 10).execution_id == "order-7.r1"
    assert store.retry("order-7", new_id="again", now=T0 + 11).execution_id == "again"
    assert store.retry("order-7", now=T0 + 12).execution_id == "order-7.r2"
    with refused("EXECUTION_ID_CONFLICT"):
        store.retry("order-7", new_id="again", now=T0 + 13)
    # a retry of a retry retries it, named after it
    store.admit("x", execution_id="order-7.r1.r1", now=T0 + 14)
    assert store.retry("order-7", now=T0 + 15).execution_id == "order-7.r3"


def test_a_retry_takes_new_params_when_given_and_keeps_the_tags(store):
    failed_at_fourth_step(store, tags={"team": "pay", "env": "prod"})
    retry = store.retry("order-7", params={"order": 8}, now=T0 + 10)
    record = store.get(retry.execution_id)
    assert json.loads(record.params_json) == {"order": 8}
    assert record.tags == {"team": "pay", "env": "prod"}
    listed = [r.execution_id for r in store.list(tags={"team": "pay"}).items]
    child = codec.decode(store.steps("order-7")[1].value)["execution_id"]
    assert listed == ["order-7.r1", child, "order-7"]  # the child carries the tags too
    with refused("INVALID_ARGUMENT"):
        store.retry("order-7", params=[1, 2], now=T0 + 11)


def test_a_cancelled_execution_is_retried_from_where_it_stopped(store):
    store.admit("charge-order", {"order": 3}, execution_id="c-1", now=T0)
    d = claim_one(store, "c-1", T0)
    store.save_step("c-1", d.token, "a", StepWrite("run", "completed", "1"), now=T0 + 1)
    store.cancel("c-1", now=T0 + 2)
    store.acknowledge("c-1", d.token, outcome_of({"status": "cancelled"}), now=T0 + 3)
    assert store.retry("c-1", now=T0 + 4).copied_steps == ["a"]


@pytest.mark.parametrize("bad", ["", "x" * 300, "a\nb"])
def test_a_bad_new_id_is_invalid(store, bad):
    failed_at_fourth_step(store)
    with refused("INVALID_ARGUMENT"):
        store.retry("order-7", new_id=bad, now=T0 + 10)


def test_a_waiting_step_before_from_is_not_copied_and_runs_again(store):
    store.admit("charge-order", {}, execution_id="w-1", now=T0)
    d = claim_one(store, "w-1", T0)
    store.save_step("w-1", d.token, "a", StepWrite("run", "completed", "1"), now=T0 + 1)
    child = store.start("w-1", "b", "ship", "{}", now=T0 + 2)
    request = {"request": {"execution_id": child, "workflow": "ship", "params": "{}"}}
    store.save_step(
        "w-1", d.token, "b", StepWrite("call", "waiting", codec.dumps(request)), now=T0 + 2
    )
    store.acknowledge("w-1", d.token, outcome_of({"status": "suspended"}), now=T0 + 3)
    store.request_wake("w-1", now=T0 + 4)
    d = next(x for x in claim(store, T0 + 4) if x.execution_id == "w-1")  # the child is due too
    store.save_step("w-1", d.token, "c", StepWrite("run", "completed", "3"), now=T0 + 5)
    error = codec.dumps(codec.ErrorValue("Boom", "d broke"))
    store.save_step("w-1", d.token, "d", StepWrite("run", "failed", error), now=T0 + 5)
    store.acknowledge("w-1", d.token, outcome_of(FAILED), now=T0 + 6)
    # by default the copy stops at the waiting call
    assert store.retry("w-1", now=T0 + 7).copied_steps == ["a"]
    # past it, the waiting call is left out (with its start request): it runs again
    retry = store.retry("w-1", from_step="d", now=T0 + 8)
    assert retry.copied_steps == ["a", "c"]
    assert [s.key for s in store.steps(retry.execution_id)] == ["a", "c"]
    assert store.start(retry.execution_id, "b", "ship", "{}", now=T0 + 9) != child
    assert store.verify() == []


def test_retry_params_have_the_admission_limit(store):
    from tests.store.test_execution_client import claim_one, refused

    store.admit("w", {"i": 1}, execution_id="X", now=T0)
    d = claim_one(store, "X", T0)
    failed = {"status": "failed", "error": {"name": "E", "message": "m"}}
    store.acknowledge("X", d.token, outcome_of(failed), now=T0 + 1)
    with refused("INVALID_ARGUMENT"):
        store.retry("X", params={"a": "x" * (2 * 1024 * 1024 + 100)}, now=T0 + 2)
    assert store.get("X.r1") is None


def test_a_retry_marks_the_original_with_its_newest_retry_in_the_same_transaction(store):
    failed_at_fourth_step(store)
    history = store.history("order-7", 1000).items
    assert store.get("order-7").retried_by is None
    store.retry("order-7", now=T0 + 10)
    assert store.get("order-7").retried_by == "order-7.r1"
    store.retry("order-7", new_id="named", now=T0 + 11)
    original = store.get("order-7")
    assert original.retried_by == "named" and original.status == "failed"
    assert store.get("named").retried_by is None
    assert store.describe("order-7").retries == ["order-7.r1", "named"]
    # the link is not an event of the original: its history still ends with its outcome
    assert store.history("order-7", 1000).items == history
    assert store.verify() == []


def test_a_retry_that_must_not_repeat_returns_the_existing_one_and_admits_nothing(store):
    failed_at_fourth_step(store)
    first = store.retry("order-7", again=False, now=T0 + 10)
    assert (first.execution_id, first.started) == ("order-7.r1", True)
    listed = [r.execution_id for r in store.list().items]
    again = store.retry("order-7", again=False, now=T0 + 11)
    assert (again.execution_id, again.retry_of, again.started) == ("order-7.r1", "order-7", False)
    assert again.copied_steps == []
    assert [r.execution_id for r in store.list().items] == listed
    assert store.retry("order-7", now=T0 + 12).execution_id == "order-7.r2"  # again by default


def test_verify_finds_a_retried_by_that_is_not_the_newest_retry(store_factory):
    store = store_factory()
    failed_at_fourth_step(store)
    store.retry("order-7", now=T0 + 10)
    store.retry("order-7", now=T0 + 11)
    store_factory.tamper(store, "order-7", retried_by="order-7.r1")
    assert store.verify() == ["order-7: retried_by is not its newest retry (order-7.r2)"]


def test_a_retry_that_fails_part_way_links_nothing(store_factory):
    store = store_factory()
    failed_at_fourth_step(store)
    record = store.get("order-7")
    # the link is written right after the admission; make the copies after it fail
    with store_factory.adapter.fail_on_insert(store, "steps"):
        with pytest.raises(Exception, match="injected failure"):
            store.retry("order-7", now=T0 + 10)
    assert store.get("order-7") == record and store.get("order-7").retried_by is None
    assert store.get("order-7.r1") is None and store.describe("order-7").retries == []
    assert store.retry("order-7", now=T0 + 11).execution_id == "order-7.r1"
    assert store.get("order-7").retried_by == "order-7.r1"
