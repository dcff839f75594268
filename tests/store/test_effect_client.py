"""RFC 004's runtime-adapter table: the EffectClient (begin, settle, wait), per adapter, and
wake delivery, one test (or a few) per row, with an explicit clock (`now=`) throughout.

| Operation or race                                  | Observable outcome                      |
| begin creates or reads an effect                   | one effect; repeats return its state     |
| begin receives changed operation or input          | rejected; the effect is unchanged        |
| settle receives equal results concurrently         | one settled result                      |
| settle receives different results                  | first remains; one conflict report       |
| failure before wait commits                        | no wake; a repeat succeeds as a first    |
| wait commits and its response is lost              | the repeat returns the first wake time   |
| settlement races with wait                         | woken; no registration without a wake    |
| the runtime restarts with stored wakes             | delivery of those wakes resumes          |
| a wake request commits but its response is lost    | resubmission merges into the same wake   |

Plus: effect records outlive their executions (never pruned, no cascade), and begin, settle
and wait are not fenced (they take no delivery token).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.store.conftest import StoreFactory
from tests.support import T0, Threads
from ys import codec
from ys.errors import (
    EffectInvariantError,
    InvalidArgument,
    NotFoundError,
    WorkflowEffectError,
    YsError,
)
from ys.outcomes import outcome_of
from ys.store.protocols import EffectState, Store

OP = "charge.v1"
EID = "shop:charge:order-42"
INPUT = {"amount": 49.99, "currency": "EUR"}
CHARGE = {"charge_id": "ch_1", "amount": 49.99}


def admitted(store: Store, execution_id: str = "order-42") -> str:
    return store.admit(
        "charge-order", {"order": 42}, execution_id=execution_id, now=T0
    ).execution_id


def idle(store: Store, *execution_ids: str, now: float = T0) -> None:
    """Admit, claim and acknowledge each execution as suspended: no pending wake remains."""
    for eid in execution_ids:
        admitted(store, eid)
    claimed = {d.execution_id: d for d in store.claim_due(now=now, limit=len(execution_ids))}
    for eid in execution_ids:
        store.acknowledge(eid, claimed[eid].token, outcome_of({"status": "suspended"}), now=now)
        assert store.get(eid).due_at is None  # type: ignore[union-attr]


def event_kinds(store: Store, execution_id: str) -> list[str]:
    return [e.kind for e in store.events(execution_id)]


class Db:
    """The test's database read behind the store's back, as another process would."""

    def __init__(self, factory: StoreFactory) -> None:
        self.factory = factory

    def rows(self, table: str) -> list[dict[str, Any]]:
        return self.factory.adapter.rows(self.factory.location, table)


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    return store_factory(clock=lambda: T0)


@pytest.fixture
def db_path(store_factory: StoreFactory) -> Db:
    """The database of `store` (and of every store `open_store` opens)."""
    return Db(store_factory)


@pytest.fixture
def open_store(store_factory: StoreFactory) -> Callable[..., Store]:
    """Another store (another runtime) on the test's database."""
    return lambda **options: store_factory(**{"clock": lambda: T0, **options})


def effect_row(db: Db, effect_id: str) -> tuple[Any, ...] | None:
    found = [
        (r["operation"], r["input"], r["status"], r["result"])
        for r in db.rows("effects")
        if r["effect_id"] == effect_id
    ]
    return found[0] if found else None


def waiters(db: Db, effect_id: str = EID) -> list[tuple[Any, ...]]:
    return sorted(
        (r["execution_id"], r["step_key"], r["wake_at"])
        for r in db.rows("effect_waiters")
        if r["effect_id"] == effect_id
    )


def conflicts(db: Db, effect_id: str = EID) -> list[tuple[Any, ...]]:
    return [
        (r["result"], r["conflicting_result"])
        for r in sorted(db.rows("effect_conflicts"), key=lambda r: r["id"])
        if r["effect_id"] == effect_id
    ]


def run_together(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run fn(0..n-1) in n threads released together by a barrier; re-raise any failure."""
    results = Threads(n, fn).results(timeout=30)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise errors[0]
    return results


# -- begin creates or reads an effect -----------------------------------------------------------


def test_begin_creates_one_effect_and_repeated_matching_calls_return_its_current_state(
    store: Store, db_path: Db
) -> None:
    admitted(store, "order-42")
    admitted(store, "support-tool")
    assert store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0) == EffectState("new")
    # the pending record exists before anything is performed
    assert effect_row(db_path, EID) == (OP, codec.dumps(INPUT), "pending", None)

    # repeats, from the same step or from another caller, read the current state
    assert store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0 + 1) == EffectState(
        "pending"
    )
    assert store.effect_begin(
        OP, EID, dict(reversed(INPUT.items())), "support-tool", "check", now=T0 + 2
    ) == EffectState("pending")  # canonical form matches

    store.effect_settle(OP, EID, codec.dumps(CHARGE), now=T0 + 3)
    for caller in ("order-42", "support-tool"):
        state = store.effect_begin(OP, EID, INPUT, caller, "charge", now=T0 + 4)
        assert state.status == "settled"
        assert codec.decode(state.result_json) == CHARGE

    assert len(db_path.rows("effects")) == 1
    described = store.effect(EID)
    assert described is not None
    assert described.status == "settled" and described.input == INPUT
    assert {b.execution_id for b in described.began_by or ()} == {"order-42", "support-tool"}


def test_begin_settled_result_is_the_canonical_text_of_the_first_settlement(store: Store) -> None:
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    store.effect_settle(OP, EID, codec.dumps(CHARGE), now=T0)
    assert store.effect_begin(OP, EID, INPUT, "x", "y", now=T0).result_json == codec.dumps(CHARGE)


# -- begin receives changed operation or input --------------------------------------------------


@pytest.mark.parametrize("settled", [False, True], ids=["pending", "settled"])
@pytest.mark.parametrize(
    "operation, input",
    [
        ("charge.v2", INPUT),
        (OP, {"amount": 59.99, "currency": "EUR"}),
        (OP, {"amount": 49.99}),
        (OP, {"amount": 49.99, "currency": "EUR", "extra": None}),
        (OP, {"amount": "49.99", "currency": "EUR"}),
    ],
    ids=["operation", "amount", "missing-key", "extra-key", "type"],
)
def test_begin_with_changed_operation_or_input_is_rejected_without_changing_the_effect(
    store: Store, db_path: Db, operation: str, input: dict[str, Any], settled: bool
) -> None:
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    if settled:
        store.effect_settle(OP, EID, codec.dumps(CHARGE), now=T0)
    before = effect_row(db_path, EID)
    began = db_path.rows("effect_begins")

    with pytest.raises(WorkflowEffectError) as info:
        store.effect_begin(operation, EID, input, "order-43", "charge", now=T0 + 1)
    assert info.value.code == "EFFECT_REQUEST_MISMATCH"

    assert effect_row(db_path, EID) == before
    assert db_path.rows("effect_begins") == began  # the rejected caller left no trace
    # the original request still matches
    expected = "settled" if settled else "pending"
    assert store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0 + 2).status == expected


def test_begin_compares_canonical_encodings_so_equal_values_match(store: Store) -> None:
    store.effect_begin(OP, EID, {"a": 0.0, "b": [1.5, {"y": 1, "x": 2}]}, "e", "k", now=T0)
    # key order and -0.0 (written as 0.0) do not change the canonical encoding
    same = {"b": [1.5, {"x": 2, "y": 1}], "a": -0.0}
    assert store.effect_begin(OP, EID, same, "e", "k", now=T0).status == "pending"
    # but 0 and 0.0 (like 1 and 1.0, or True) are different durable values
    with pytest.raises(WorkflowEffectError):
        store.effect_begin(OP, EID, {"a": 0, "b": [1.5, {"x": 2, "y": 1}]}, "e", "k", now=T0)


# -- settle receives equal results concurrently -------------------------------------------------


@pytest.mark.parametrize("group_commit", [True, False], ids=["group-commit", "direct"])
def test_settle_with_equal_results_concurrently_leaves_one_settled_result(
    open_store: Callable[..., Store], db_path: Db, group_commit: bool
) -> None:
    store = open_store(group_commit=group_commit)
    others = [open_store() for _ in range(3)]  # other runtimes on the same file
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    result = codec.dumps(CHARGE)
    stores = [store] * 5 + others

    answers = run_together(
        len(stores), lambda i: stores[i].effect_settle(OP, EID, result, now=T0 + 1)
    )

    assert answers == [EffectState("settled", result)] * len(stores)
    assert effect_row(db_path, EID) == (OP, codec.dumps(INPUT), "settled", result)
    assert conflicts(db_path) == []


def test_settle_compares_canonical_results_so_equal_values_in_other_text_do_not_conflict(
    store: Store, db_path: Db
) -> None:
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    first = store.effect_settle(OP, EID, '{"amount": 49.99, "charge_id": "ch_1"}', now=T0)
    again = store.effect_settle(OP, EID, codec.dumps(CHARGE), now=T0 + 1)
    assert first == again == EffectState("settled", codec.dumps(CHARGE))
    assert conflicts(db_path) == []


# -- settle receives different results ----------------------------------------------------------


def test_settle_with_different_results_keeps_the_first_and_reports_one_conflict_with_both(
    open_store: Callable[..., Store], db_path: Db
) -> None:
    store = open_store(group_commit=True)
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    results = [codec.dumps({"charge_id": "ch_1"}), codec.dumps({"charge_id": "ch_2"})]

    answers = run_together(2, lambda i: store.effect_settle(OP, EID, results[i], now=T0 + 1))

    settled = [a for a in answers if a.status == "settled"]
    conflicted = [a for a in answers if a.status == "conflict"]
    assert len(settled) == 1 and len(conflicted) == 1
    first = settled[0].result_json
    second = next(r for r in results if r != first)
    assert conflicted[0] == EffectState("conflict", first, second)
    assert effect_row(db_path, EID) == (OP, codec.dumps(INPUT), "settled", first)
    assert conflicts(db_path) == [(first, second)]  # one permanent report with both values

    # operators can inspect it
    described = store.effect(EID)
    assert described is not None
    assert described.result == codec.decode(first)
    assert described.conflicts[0].result == codec.decode(first)
    assert described.conflicts[0].conflicting_result == codec.decode(second)
    assert [e.effect_id for e in store.effects(status="conflict")] == [EID]
    # and a later equal settlement still returns the first result
    assert store.effect_settle(OP, EID, first, now=T0 + 2) == EffectState("settled", first)


def test_settle_of_an_effect_never_begun_or_with_another_operation_is_a_runtime_invariant(
    store: Store, db_path: Db
) -> None:
    with pytest.raises(EffectInvariantError) as info:
        store.effect_settle(OP, "never-begun", codec.dumps(CHARGE), now=T0)
    assert info.value.code == "EFFECT_RUNTIME_INVARIANT"
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    with pytest.raises(EffectInvariantError):
        store.effect_settle("charge.v2", EID, codec.dumps(CHARGE), now=T0)
    assert effect_row(db_path, EID) == (OP, codec.dumps(INPUT), "pending", None)


# -- failure before wait commits ----------------------------------------------------------------


def test_failure_before_wait_commits_schedules_no_wake_and_a_repeat_succeeds_as_a_first_call(
    store: Store, db_path: Db
) -> None:
    idle(store, "order-42")
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    history = event_kinds(store, "order-42")
    # The registration is written first; make the wake request that follows it fail, inside
    # the same transaction (as a full disk or a crash at that point would).
    with db_path.factory.adapter.fail_on_insert(store, "events", kind="wake_requested"):
        with pytest.raises(Exception, match="injected failure"):
            store.effect_wait(EID, "order-42", "charge", T0 + 60, now=T0 + 1)

    assert waiters(db_path) == []  # all-or-nothing: no registration without its wake
    assert store.get("order-42").due_at is None  # type: ignore[union-attr]
    assert event_kinds(store, "order-42") == history

    # the repeat is a first call: it registers and requests the wake it asks for
    assert store.effect_wait(EID, "order-42", "charge", T0 + 61, now=T0 + 2) == T0 + 61
    assert waiters(db_path) == [("order-42", "charge", T0 + 61)]
    assert store.get("order-42").due_at == T0 + 61  # type: ignore[union-attr]


def test_wait_for_an_unknown_execution_or_effect_commits_nothing(store: Store, db_path: Db) -> None:
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    with pytest.raises(NotFoundError):
        store.effect_wait(EID, "no-such-execution", "charge", T0 + 60, now=T0)
    assert waiters(db_path) == []
    idle(store, "order-42")
    with pytest.raises(InvalidArgument):  # the caller's mistake: 400, not a runtime fault
        store.effect_wait("never-begun", "order-42", "charge", T0 + 60, now=T0)
    assert len(db_path.rows("effect_waiters")) == 0
    assert store.get("order-42").due_at is None  # type: ignore[union-attr]


# -- wait commits and its response is lost ------------------------------------------------------


def test_wait_repeated_after_a_lost_response_returns_the_first_wake_time_and_adds_nothing(
    store: Store, db_path: Db
) -> None:
    idle(store, "order-42")
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    assert store.effect_wait(EID, "order-42", "charge", T0 + 60, now=T0 + 1) == T0 + 60
    history = event_kinds(store, "order-42")

    # the response was lost; the next delivery asks again, later and with a later wake time
    for at, wake in ((T0 + 2, T0 + 62), (T0 + 30, T0 + 90), (T0 + 59, T0 + 119)):
        assert store.effect_wait(EID, "order-42", "charge", wake, now=at) == T0 + 60

    assert waiters(db_path) == [("order-42", "charge", T0 + 60)]
    assert event_kinds(store, "order-42") == history
    assert store.get("order-42").due_at == T0 + 60  # type: ignore[union-attr]


# -- settlement races with wait -----------------------------------------------------------------


@pytest.mark.parametrize("runtimes", ["group-commit", "two-stores"])
def test_settlement_racing_wait_wakes_the_waiting_execution_and_leaves_no_registration(
    open_store: Callable[..., Store], db_path: Db, runtimes: str
) -> None:
    n = 40
    if runtimes == "group-commit":
        waiter_store = settler_store = open_store(group_commit=True)
    else:
        waiter_store, settler_store = open_store(), open_store()
    ids = [f"order-{i}" for i in range(n)]
    idle(waiter_store, *ids)
    outcomes = set()
    for i, execution_id in enumerate(ids):
        effect_id = f"{EID}-{i}"
        waiter_store.effect_begin(OP, effect_id, INPUT, execution_id, "charge", now=T0)

        # (which thread leaves the barrier first is biased, so the roles alternate)
        waits = i % 2

        def race(
            k: int, effect_id: str = effect_id, execution_id: str = execution_id, waits: int = waits
        ) -> Any:
            if k == waits:
                return waiter_store.effect_wait(
                    effect_id, execution_id, "charge", T0 + 3600, now=T0 + 1
                )
            return settler_store.effect_settle(OP, effect_id, codec.dumps(CHARGE), now=T0 + 1)

        answers = run_together(2, race)
        wake_at, settled = answers[waits], answers[1 - waits]
        assert settled.status == "settled"
        outcomes.add("wait first" if wake_at == T0 + 3600 else "settle first")
        # woken now, whichever committed first; no registration is left behind
        assert waiter_store.get(execution_id).due_at == T0 + 1  # type: ignore[union-attr]
        assert waiters(db_path, effect_id) == []
    assert outcomes  # (both orders are usually seen; each must keep the invariant)
    assert [d.execution_id for d in settler_store.claim_due(now=T0 + 1, limit=n + 1)] == sorted(ids)


def test_wait_after_settlement_wakes_at_once_and_settlement_wakes_every_waiter(
    store: Store, db_path: Db
) -> None:
    idle(store, "a", "b", "c")
    store.effect_begin(OP, EID, INPUT, "a", "charge", now=T0)
    store.effect_wait(EID, "a", "charge", T0 + 600, now=T0)
    store.effect_wait(EID, "b", "charge", T0 + 900, now=T0)
    store.effect_settle(OP, EID, codec.dumps(CHARGE), now=T0 + 5)
    assert waiters(db_path) == []
    assert store.get("a").due_at == store.get("b").due_at == T0 + 5  # type: ignore[union-attr]
    # a wait that arrives after settlement registers nothing and wakes at once
    assert store.effect_wait(EID, "c", "charge", T0 + 600, now=T0 + 6) == T0 + 6
    assert waiters(db_path) == []
    assert store.get("c").due_at == T0 + 6  # type: ignore[union-attr]


# -- the runtime restarts with stored wakes -----------------------------------------------------


def test_runtime_restart_with_stored_wakes_resumes_their_delivery(
    open_store: Callable[..., Store], db_path: Db
) -> None:
    first = open_store()
    idle(first, "timer", "settles")
    first.effect_begin(OP, "eff-timer", INPUT, "timer", "charge", now=T0)
    first.effect_begin(OP, "eff-settles", INPUT, "settles", "charge", now=T0)
    assert first.effect_wait("eff-timer", "timer", "charge", T0 + 60, now=T0) == T0 + 60
    assert first.effect_wait("eff-settles", "settles", "charge", T0 + 3600, now=T0) == T0 + 3600
    first.close()

    again = open_store()  # a new runtime on the same file
    assert again.claim_due(now=T0 + 59, limit=10) == []
    due = again.claim_due(now=T0 + 60, limit=10)
    assert [d.execution_id for d in due] == ["timer"]
    # a stored registration survives too: settling wakes its execution
    assert waiters(db_path, "eff-settles") == [("settles", "charge", T0 + 3600)]
    again.effect_settle(OP, "eff-settles", codec.dumps(CHARGE), now=T0 + 61)
    assert [d.execution_id for d in again.claim_due(now=T0 + 61, limit=10)] == ["settles"]


# -- a wake request commits but its response is lost --------------------------------------------


def test_wake_request_resubmitted_after_a_lost_response_merges_into_the_same_pending_wake(
    store: Store, db_path: Db
) -> None:
    idle(store, "order-42")
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    store.effect_wait(EID, "order-42", "charge", T0 + 60, now=T0)
    history = store.events("order-42")
    assert [e.kind for e in history].count("wake_requested") == 1

    assert store.effect_wait(EID, "order-42", "charge", T0 + 61, now=T0 + 1) == T0 + 60
    assert store.request_wake("order-42", T0 + 60, now=T0 + 1) == "requested"
    assert store.request_wake("order-42", T0 + 75, now=T0 + 1) == "requested"

    assert store.events("order-42") == history  # nothing new: merged
    assert store.get("order-42").due_at == T0 + 60  # type: ignore[union-attr]
    (d,) = store.claim_due(now=T0 + 60, limit=5)
    store.acknowledge("order-42", d.token, outcome_of({"status": "suspended"}), now=T0 + 61)
    assert store.claim_due(now=T0 + 120, limit=5) == []  # one delivery, not one per request


def test_wait_merges_into_an_earlier_pending_wake_of_the_execution(
    store: Store, db_path: Db
) -> None:
    idle(store, "order-42")
    store.request_wake("order-42", T0 + 10, now=T0)
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    kinds = event_kinds(store, "order-42")
    assert store.effect_wait(EID, "order-42", "charge", T0 + 60, now=T0) == T0 + 60
    assert store.get("order-42").due_at == T0 + 10  # type: ignore[union-attr]
    assert event_kinds(store, "order-42") == kinds  # merged: no second wake event
    assert waiters(db_path) == [("order-42", "charge", T0 + 60)]


# -- effect records are not pruned with an execution --------------------------------------------


def test_effect_records_outlive_their_executions(store: Store, db_path: Db) -> None:
    idle(store, "order-42", "order-43")
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    store.effect_settle(OP, EID, codec.dumps(CHARGE), now=T0)
    store.effect_begin(OP, "still-pending", INPUT, "order-43", "charge", now=T0)
    store.effect_wait("still-pending", "order-43", "charge", T0 + 60, now=T0)
    for execution_id in ("order-42", "order-43"):
        store.request_wake(execution_id, T0 + 1, now=T0 + 1)
    for d in store.claim_due(now=T0 + 1, limit=5):
        store.acknowledge(
            d.execution_id, d.token, outcome_of({"status": "completed", "result": None}), now=T0 + 1
        )
    assert {store.get(e).status for e in ("order-42", "order-43")} == {"completed"}  # type: ignore[union-attr]

    # delete the executions as pruning would (history, steps and record): nothing ties an
    # effect record to an execution, so nothing cascades and nothing refuses
    db_path.factory.adapter.delete_rows(db_path.factory.location, "events", "steps", "executions")

    assert effect_row(db_path, EID) == (OP, codec.dumps(INPUT), "settled", codec.dumps(CHARGE))
    assert effect_row(db_path, "still-pending") == (OP, codec.dumps(INPUT), "pending", None)
    # a later caller still gets the stored result, and the pending effect may still settle
    admitted(store, "order-44")
    assert store.effect_begin(OP, EID, INPUT, "order-44", "charge", now=T0 + 2) == EffectState(
        "settled", codec.dumps(CHARGE)
    )
    assert (
        store.effect_settle(OP, "still-pending", codec.dumps(CHARGE), now=T0 + 2).status
        == "settled"
    )
    assert len(db_path.rows("effects")) == 2


def test_cancelling_an_execution_leaves_its_pending_effect_pending_and_settleable(
    store: Store, db_path: Db
) -> None:
    idle(store, "order-42")
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    store.effect_wait(EID, "order-42", "charge", T0 + 60, now=T0)
    assert store.cancel("order-42", now=T0 + 1)
    (d,) = store.claim_due(now=T0 + 1, limit=1)
    store.acknowledge("order-42", d.token, outcome_of({"status": "cancelled"}), now=T0 + 1)
    assert effect_row(db_path, EID) == (OP, codec.dumps(INPUT), "pending", None)
    assert store.effect_settle(OP, EID, codec.dumps(CHARGE), now=T0 + 2).status == "settled"
    assert store.get("order-42").status == "cancelled"  # type: ignore[union-attr]


# -- begin, settle and wait are not fenced ------------------------------------------------------


def test_begin_settle_and_wait_take_no_delivery_token(
    open_store: Callable[..., Store], db_path: Db
) -> None:
    store = open_store(lease_seconds=30)
    for method in (store.effect_begin, store.effect_settle, store.effect_wait):
        assert "token" not in inspect.signature(method).parameters
    # save_step, by contrast, is fenced
    assert "token" in inspect.signature(store.save_step).parameters

    admitted(store, "order-42")
    (d,) = store.claim_due(now=T0, limit=1)  # another delivery holds the lease
    assert store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0 + 1).status == "new"
    assert store.effect_wait(EID, "order-42", "charge", T0 + 60, now=T0 + 1) == T0 + 60
    # the lease has expired and nobody holds it: still accepted
    assert store.effect_wait(EID, "order-42", "charge", T0 + 61, now=T0 + 31) == T0 + 60
    assert store.effect_settle(OP, EID, codec.dumps(CHARGE), now=T0 + 40).status == "settled"
    assert (
        store.effect_begin(OP, EID, INPUT, "support-tool", "check", now=T0 + 41).status == "settled"
    )


def test_begin_refuses_an_invalid_request_without_a_trace(store: Store, db_path: Db) -> None:
    bad: list[tuple[Any, Any, Any]] = [
        ("", OP, INPUT),
        (EID, "", INPUT),
        (EID, OP, [1]),
        (EID, OP, {"x": float("nan")}),
        ("a\nb", OP, INPUT),
        ("x" * 257, OP, INPUT),
        (EID, OP, {"x": {1, 2}}),
    ]
    for effect_id, operation, input in bad:
        with pytest.raises(WorkflowEffectError) as info:
            store.effect_begin(operation, effect_id, input, "order-42", "charge", now=T0)
        assert info.value.code == "INVALID_EFFECT_REQUEST"
    assert len(db_path.rows("effects")) == 0
    assert len(db_path.rows("effect_begins")) == 0


def test_settle_refuses_text_that_is_not_a_durable_value(store: Store, db_path: Db) -> None:
    store.effect_begin(OP, EID, INPUT, "order-42", "charge", now=T0)
    for text in ("NaN", "{not json", '{"$x": 1}', json.dumps({"a": float("inf")})):
        with pytest.raises((ValueError, YsError)):
            store.effect_settle(OP, EID, text, now=T0)
    assert effect_row(db_path, EID) == (OP, codec.dumps(INPUT), "pending", None)
