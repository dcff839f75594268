"""RFC 003, runtime-adapter table: the start client (`StartClient.start`), per adapter.

Every row of the table is one test named after its case; the extra tests pin the Required
Semantics the table leaves implicit (missing params vs {}, fresh target IDs, no fencing). The
worker's side encodes a request's params once (`ys.contract.request_params`); the store
checks that text (`params_json`) and compares requests by it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.store.conftest import StoreFactory
from tests.support import T0, Threads
from ys import codec
from ys.contract import MAX_PARAMS_BYTES, request_params
from ys.errors import ExecutionAdmissionError, LeaseLost, ResourceExhausted, WorkflowStartError
from ys.outcomes import outcome_of
from ys.store.protocols import Store
from ys.values import StepWrite

BIG = {"label": "x" * 200_000}  # large enough that admitting it must allocate new pages


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    return store_factory(clock=lambda: T0)


@pytest.fixture
def caller(store: Store) -> str:
    """A directly triggered caller execution (`order-42`)."""
    return store.admit("charge-order", {"order": 42}, execution_id="order-42", now=T0).execution_id


def _start(s: Store, caller: str, key: str, workflow: str, params: Any, **kw: Any) -> str:
    """A start as the worker sends it: the params encoded once, then the store's call."""
    return s.start(caller, key, workflow, request_params(params), **kw)


def count_targets(factory: StoreFactory, s: Store, caller_id: str | None = None) -> int:
    """Executions started by `caller_id` (or every execution with a parent), read behind the
    store's back, as another process would."""
    rows = factory.rows(s, "executions")
    if caller_id is None:
        return sum(1 for r in rows if r["parent_id"] is not None)
    return sum(1 for r in rows if r["parent_id"] == caller_id)


def start_rows(factory: StoreFactory, s: Store) -> list[tuple[Any, ...]]:
    """The recorded start requests: (caller, step key, workflow, params, detached, target)."""
    return [
        (r["caller_id"], r["step_key"], r["workflow"], r["params"], r["detached"], r["target_id"])
        for r in factory.rows(s, "start_requests")
    ]


def _finish(s: Store, execution_id: str, at: float) -> None:
    """Deliver `execution_id` and acknowledge it completed (the target becomes terminal)."""
    deliveries = {d.execution_id: d for d in s.claim_due(now=at, limit=100)}
    d = deliveries[execution_id]
    s.acknowledge(
        execution_id, d.token, outcome_of({"status": "completed", "result": "shipped"}), now=at
    )


# -- the table ---------------------------------------------------------------------------------


@pytest.mark.parametrize("group_commit", [False, True], ids=["direct", "group"])
def test_failure_before_a_new_start_commits_admits_nothing_and_a_repeat_succeeds_as_a_first_call(
    store_factory: StoreFactory, group_commit: bool
):
    s = store_factory(group_commit=group_commit, clock=lambda: T0)
    adapter = store_factory.adapter
    s.admit("charge-order", {}, execution_id="order-42", now=T0)
    executions_before = s.list().items

    # 1. The database is full: the start's transaction cannot commit.
    adapter.limit_space(s, 0)
    with pytest.raises(ResourceExhausted) as exc:
        _start(s, "order-42", "ship", "ship-order", BIG, now=T0 + 1)
    assert exc.value.code == "RESOURCE_EXHAUSTED"
    adapter.limit_space(s, None)
    assert count_targets(store_factory, s) == 0
    assert start_rows(store_factory, s) == []
    assert [r.execution_id for r in s.list().items] == [r.execution_id for r in executions_before]

    # 2. The transaction fails after the target was admitted but before the request record is
    #    written (the exact gap RFC 003 closes): the admission is rolled back with it.
    with adapter.fail_on_insert(s, "start_requests"):
        with pytest.raises(Exception, match="injected failure"):
            _start(s, "order-42", "ship", "ship-order", BIG, now=T0 + 2)
    assert count_targets(store_factory, s) == 0
    assert start_rows(store_factory, s) == []
    assert s.claim_due(now=T0 + 2, limit=100) != []  # only the caller is due
    assert s.list(parent="order-42").items == []

    # 3. A failure after the start's writes, before COMMIT (its last row is written, then the
    #    transaction fails): nothing of it is observable.
    with adapter.fail_on_insert(s, "start_requests", after_row=True):
        with pytest.raises(Exception, match="injected failure"):
            _start(s, "order-42", "ship", "ship-order", BIG, now=T0 + 3)
    assert count_targets(store_factory, s) == 0
    assert start_rows(store_factory, s) == []

    # The repeated call succeeds as a first call: one new target, admitted now, due now.
    target = _start(s, "order-42", "ship", "ship-order", BIG, now=T0 + 4)
    rec = s.get(target)
    assert rec is not None and rec.admitted_at == T0 + 4 and rec.due_at == T0 + 4
    assert count_targets(store_factory, s, "order-42") == 1
    assert s.verify() == []


def test_start_commit_followed_by_a_lost_response_repeats_to_the_committed_id_and_one_target(
    store_factory: StoreFactory,
):
    s = store_factory(clock=lambda: T0)
    s.admit("charge-order", {}, execution_id="order-42", now=T0)
    # The start commits; the caller never sees this answer (the connection dropped).
    committed = _start(s, "order-42", "ship", "ship-order", {"order": 42}, now=T0 + 1)
    assert count_targets(store_factory, s, "order-42") == 1

    # The caller (after a restart: another store on the same database) repeats the call.
    again = store_factory(clock=lambda: T0)
    assert _start(again, "order-42", "ship", "ship-order", {"order": 42}, now=T0 + 5) == committed
    assert _start(s, "order-42", "ship", "ship-order", {"order": 42}, now=T0 + 6) == committed
    assert count_targets(store_factory, s, "order-42") == 1
    assert again.get(committed).admitted_at == T0 + 1  # the first admission, untouched


@pytest.mark.parametrize("mode", ["direct", "group", "two-stores"])
def test_two_concurrent_calls_with_one_start_request_id_return_one_id_and_admit_one_target(
    store_factory: StoreFactory, mode: str
):
    first = store_factory(group_commit=(mode == "group"), clock=lambda: T0)
    first.admit("charge-order", {}, execution_id="order-42", now=T0)
    second = store_factory(clock=lambda: T0) if mode == "two-stores" else first
    n = 8

    def call(i: int) -> str:
        s = first if i % 2 == 0 else second
        return _start(s, "order-42", "ship", "ship-order", {"order": 42}, now=T0 + 1)

    outcomes = Threads(n, call).results(timeout=30)
    errors = [r for r in outcomes if isinstance(r, BaseException)]
    results = [r for r in outcomes if not isinstance(r, BaseException)]
    assert errors == []
    assert len(results) == n and len(set(results)) == 1
    assert count_targets(store_factory, first, "order-42") == 1
    assert len(start_rows(store_factory, first)) == 1


def test_two_different_start_request_ids_each_receive_a_different_execution_id(
    store_factory: StoreFactory, store: Store, caller: str
):
    store.admit("other-order", {}, execution_id="order-43", now=T0)
    a = _start(store, caller, "ship", "ship-order", {"order": 42}, now=T0 + 1)
    b = _start(store, caller, "ship-again", "ship-order", {"order": 42}, now=T0 + 1)
    c = _start(store, "order-43", "ship", "ship-order", {"order": 42}, now=T0 + 1)
    assert len({a, b, c}) == 3
    assert count_targets(store_factory, store) == 3


def test_a_new_start_commits_the_target_admitted_due_and_linked_to_its_caller(
    store: Store, caller: str
):
    target = _start(store, caller, "ship", "ship-order", {"order": 42}, now=T0 + 1)
    rec = store.get(target)
    assert rec is not None
    assert (rec.workflow, rec.status, rec.params_json) == ("ship-order", "admitted", '{"order":42}')
    assert rec.parent.to_json() == {"execution_id": caller, "step_key": "ship", "detached": False}
    assert rec.due_at == T0 + 1  # its first wake is in the same commit
    # the admission event carries the parent link: the record is a fold of its history
    first = store.events(target)[0]
    assert first.kind == "admitted" and first.data.parent == rec.parent
    assert store.verify() == []
    # due: the dispatcher claims it
    claimed = {d.execution_id: d for d in store.claim_due(now=T0 + 1, limit=10)}
    assert target in claimed and claimed[target].workflow == "ship-order"
    # reads show the link both ways
    assert [r.execution_id for r in store.list(parent=caller).items] == [target]
    assert [c.execution_id for c in store.describe(caller).children] == [target]


def test_a_start_with_detached_true_marks_the_parent_link_detached(
    store_factory: StoreFactory, store: Store, caller: str
):
    attached = _start(store, caller, "ship", "ship-order", {"order": 42}, now=T0 + 1)
    detached = _start(
        store, caller, "audit", "audit-order", {"order": 42}, detached=True, now=T0 + 1
    )
    assert store.get(detached).parent.to_json() == {
        "execution_id": caller,
        "step_key": "audit",
        "detached": True,
    }
    assert store.get(attached).parent.detached is False
    # detached is part of the stored request, beside the target
    assert [(r[1], r[4]) for r in start_rows(store_factory, store)] == [("audit", 1), ("ship", 0)]


@pytest.mark.parametrize(
    "params",
    [
        {"amount": float("nan")},
        {"amount": float("inf")},
        {"tags": {"a", "b"}},
        {"when": object()},
        {1: "non-text key"},
        {"nested": [1, {"f": lambda: 1}]},
        ["not", "an", "object"],
        "text",
        42,
    ],
    ids=["nan", "inf", "set", "object", "int-key", "function", "list", "str", "int"],
)
def test_invalid_start_parameters_return_invalid_start_parameters_and_admit_nothing(
    store_factory: StoreFactory, store: Store, caller: str, params: Any
):
    before = store.history(caller).items
    with pytest.raises(WorkflowStartError) as exc:
        _start(store, caller, "ship", "ship-order", params, now=T0 + 1)
    assert exc.value.code == "INVALID_START_PARAMETERS"
    assert count_targets(store_factory, store) == 0
    assert start_rows(store_factory, store) == []
    assert store.history(caller).items == before
    # the request ID is still free: a valid call is a first call
    _start(store, caller, "ship", "ship-order", {"order": 42}, now=T0 + 2)
    assert count_targets(store_factory, store) == 1


@pytest.mark.parametrize(
    "params_json",
    [
        '["not", "an", "object"]',
        '"text"',
        "42",
        "true",
        '{"amount": NaN}',
        "{not json",
        '{"b": 1, "a": 2}',
        '{"b":1,"a":2}',
        ' {"a":1}',
        "",
        '{"x":"' + "y" * MAX_PARAMS_BYTES + '"}',
    ],
    ids=[
        "list",
        "str",
        "int",
        "bool",
        "nan",
        "not-json",
        "spaces",
        "key-order",
        "leading-space",
        "empty",
        "over-2-MiB",
    ],
)
def test_params_text_that_is_not_a_canonical_object_is_invalid_start_parameters(
    store_factory: StoreFactory, store: Store, caller: str, params_json: str
):
    """The store checks the worker's text once: an object, within the limit, in the one
    canonical form requests are compared in (any other spelling would never match)."""
    before = store.history(caller).items
    with pytest.raises(WorkflowStartError) as exc:
        store.start(caller, "ship", "ship-order", params_json, now=T0 + 1)
    assert exc.value.code == "INVALID_START_PARAMETERS"
    assert count_targets(store_factory, store) == 0
    assert start_rows(store_factory, store) == []
    assert store.history(caller).items == before
    # the canonical text of the same request is a first call
    assert store.start(caller, "ship", "ship-order", '{"a":2,"b":1}', now=T0 + 2)
    assert start_rows(store_factory, store)[0][3] == '{"a":2,"b":1}'


def test_a_reference_cycle_is_invalid_start_parameters(
    store_factory: StoreFactory, store: Store, caller: str
):
    loop: dict[str, Any] = {"a": 1}
    loop["self"] = loop
    with pytest.raises(WorkflowStartError) as exc:
        _start(store, caller, "ship", "ship-order", loop, now=T0 + 1)
    assert exc.value.code == "INVALID_START_PARAMETERS"
    assert count_targets(store_factory, store) == 0


def test_parameter_objects_with_different_key_order_encode_the_same_and_the_requests_match(
    store_factory: StoreFactory, store: Store, caller: str
):
    # -0.0 encodes as 0.0 (equal floats encode alike; 0 and 0.0 stay apart, as in Python)
    one = {"order": 42, "lines": [{"sku": "a", "qty": 1}], "zero": 0.0, "address": {"b": 2, "a": 1}}
    two = {
        "address": {"a": 1, "b": 2},
        "zero": -0.0,
        "lines": [{"qty": 1, "sku": "a"}],
        "order": 42,
    }
    assert list(one) != list(two)
    enc1, enc2 = codec.encode(one), codec.encode(two)
    assert enc1.status == enc2.status == "encoded"
    assert enc1.canonical == enc2.canonical
    assert enc1.canonical == (
        '{"address":{"a":1,"b":2},"lines":[{"qty":1,"sku":"a"}],"order":42,"zero":0.0}'
    )
    first = _start(store, caller, "ship", "ship-order", one, now=T0 + 1)
    assert _start(store, caller, "ship", "ship-order", two, now=T0 + 2) == first
    assert count_targets(store_factory, store) == 1


@pytest.mark.parametrize("change", ["workflow", "params", "params-type", "params-missing"])
def test_a_repeated_request_that_changes_workflow_or_params_is_start_request_mismatch(
    store_factory: StoreFactory, store: Store, caller: str, change: str
):
    original = _start(store, caller, "ship", "ship-order", {"order": 42}, now=T0 + 1)
    rows, rec = start_rows(store_factory, store), store.get(original)
    changed = {
        "workflow": ("ship-express", {"order": 42}),
        "params": ("ship-order", {"order": 43}),
        "params-type": ("ship-order", {"order": 42.5}),
        "params-missing": ("ship-order", None),
    }[change]
    with pytest.raises(WorkflowStartError) as exc:
        _start(store, caller, "ship", changed[0], changed[1], now=T0 + 2)
    assert exc.value.code == "START_REQUEST_MISMATCH"
    # the original start is unchanged: same request record, same target, nothing new admitted
    assert start_rows(store_factory, store) == rows
    assert store.get(original) == rec
    assert count_targets(store_factory, store) == 1
    assert _start(store, caller, "ship", "ship-order", {"order": 42}, now=T0 + 3) == original


def test_missing_params_and_an_empty_object_do_not_match(
    store_factory: StoreFactory, store: Store, caller: str
):
    assert request_params(None) != request_params({})
    missing = _start(store, caller, "no-params", "ship-order", None, now=T0 + 1)
    empty = _start(store, caller, "empty-params", "ship-order", {}, now=T0 + 1)
    with pytest.raises(WorkflowStartError) as exc:
        _start(store, caller, "no-params", "ship-order", {}, now=T0 + 2)
    assert exc.value.code == "START_REQUEST_MISMATCH"
    with pytest.raises(WorkflowStartError) as exc:
        _start(store, caller, "empty-params", "ship-order", None, now=T0 + 2)
    assert exc.value.code == "START_REQUEST_MISMATCH"
    assert _start(store, caller, "no-params", "ship-order", None, now=T0 + 3) == missing
    assert _start(store, caller, "empty-params", "ship-order", {}, now=T0 + 3) == empty
    assert count_targets(store_factory, store) == 2


def test_a_matching_request_after_the_target_is_terminal_returns_the_original_id(
    store_factory: StoreFactory, store: Store, caller: str
):
    target = _start(store, caller, "ship", "ship-order", {"order": 42}, now=T0 + 1)
    _finish(store, target, T0 + 2)
    assert store.get(target).status == "completed"
    assert _start(store, caller, "ship", "ship-order", {"order": 42}, now=T0 + 3) == target
    assert count_targets(store_factory, store) == 1
    assert store.get(target).status == "completed"  # not admitted again, not due
    assert store.get(target).due_at is None
    # and a changed request is still a mismatch after the target ended
    with pytest.raises(WorkflowStartError) as exc:
        _start(store, caller, "ship", "ship-express", {"order": 42}, now=T0 + 4)
    assert exc.value.code == "START_REQUEST_MISMATCH"
    assert count_targets(store_factory, store) == 1


# -- Required Semantics beyond the table -------------------------------------------------------


def test_started_target_ids_never_collide_with_directly_triggered_ones(
    store_factory: StoreFactory, store: Store, caller: str, monkeypatch: pytest.MonkeyPatch
):
    # A directly triggered execution already holds the first ID the generator will offer.
    # (a generated ID is the admission time in ms, 11 hex digits, then 8 random hex digits)
    stamp = f"{int((T0 + 1) * 1000):011x}"
    taken = f"ship-order-{stamp}aaaaaaaa"
    store.admit("ship-order", {"by": "hand"}, execution_id=taken, now=T0)
    store_factory.adapter.force_id_bits(monkeypatch, [0xAAAAAAAA, 0xBBBBBBBB])
    target = _start(store, caller, "ship", "ship-order", {"order": 42}, now=T0 + 1)
    assert target == f"ship-order-{stamp}bbbbbbbb"  # a fresh ID, not the taken one
    assert store.get(taken).parent is None  # the direct one is untouched
    monkeypatch.undo()
    # a direct trigger can never take a started target's ID either
    with pytest.raises(ExecutionAdmissionError) as exc:
        store.admit("ship-order", {"order": 42}, execution_id=target, now=T0 + 2)
    assert exc.value.code == "EXECUTION_ID_CONFLICT"
    # an idempotent trigger (RFC 001's use-existing) of the same request finds it: still one
    # record, nothing admitted, the parent link kept
    before = store.get(target)
    again = store.admit(
        "ship-order", {"order": 42}, execution_id=target, if_exists="use-existing", now=T0 + 2
    )
    assert (again.execution_id, again.started) == (target, False)
    assert store.get(target) == before
    # many starts: all distinct, none equal to a direct ID
    ids = {_start(store, caller, f"k{i}", "ship-order", {"i": i}, now=T0 + 3) for i in range(50)}
    assert len(ids) == 50 and taken not in ids and target not in ids


def test_start_is_not_fenced_a_stale_lease_holder_gets_the_same_target(store_factory: StoreFactory):
    s = store_factory(lease_seconds=30, clock=lambda: T0)
    s.admit("charge-order", {}, execution_id="order-42", now=T0)
    (stale,) = s.claim_due(now=T0, limit=1)
    # the first holder starts the child, then freezes; its lease expires
    target = _start(s, "order-42", "ship", "ship-order", {"order": 42}, now=T0 + 1)
    (fresh,) = [d for d in s.claim_due(now=T0 + 31, limit=10) if d.execution_id == "order-42"]
    assert fresh.token != stale.token
    # the stale holder may not record anything ...
    with pytest.raises(LeaseLost):
        s.save_step(
            "order-42", stale.token, "ship", StepWrite("start", "completed", None), now=T0 + 32
        )
    # ... but its start (which takes no token at all) answers as for anyone: the same target
    assert _start(s, "order-42", "ship", "ship-order", {"order": 42}, now=T0 + 32) == target
    # the new holder replays the step and gets the same target too
    assert _start(s, "order-42", "ship", "ship-order", {"order": 42}, now=T0 + 33) == target
    assert count_targets(store_factory, s, "order-42") == 1
    # and it works with no delivery at all (after the caller is released)
    s.release("order-42", fresh.token, now=T0 + 34)
    assert _start(s, "order-42", "ship", "ship-order", {"order": 42}, now=T0 + 35) == target
    assert count_targets(store_factory, s, "order-42") == 1


def test_a_start_whose_caller_does_not_exist_admits_nothing(
    store_factory: StoreFactory, store: Store
):
    from ys.errors import NotFoundError

    with pytest.raises(NotFoundError):
        _start(store, "no-such-caller", "ship", "ship-order", {"order": 42}, now=T0)
    assert count_targets(store_factory, store) == 0 and start_rows(store_factory, store) == []
