"""The workflow-service course's cases (sections 2-5) in ys terms, per adapter.

The course's run is ys's execution, its StartWorkflow is `admit(..., if_exists="use-existing")`,
FAILED_PRECONDITION is EXECUTION_ID_CONFLICT, and the WAL quota is the database running out
of space. ys admits with one `admitted` event (no separate workflow task): the execution is due
from that event on.
"""

from __future__ import annotations

import json
import multiprocessing
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import Threads
from ys import codec
from ys.contract import MAX_PARAMS_BYTES
from ys.errors import YsError
from ys.outcomes import outcome_of
from ys.store.base import AdmissionContext
from ys.store.paging import history_token, parse_history_token
from ys.store.protocols import AdmittedData, Event, HistoryEvent
from ys.values import StepWrite

T0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()  # 1767225600
LEASE = 30.0
CONCURRENT = 64


@contextmanager
def refused(code: str):
    with pytest.raises(YsError) as info:
        yield info
    assert info.value.code == code, f"expected {code}, got {info.value.code}: {info.value}"


def history(store: Any, execution_id: str) -> list[HistoryEvent]:
    return store.history(execution_id, limit=1000).items


def canonical_size(data: Any) -> int:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8"))


def assert_nothing_stored(store: Any, execution_id: str) -> None:
    assert store.get(execution_id) is None
    assert store.list().items == []
    assert store.claim_due(now=T0 + 10**7, limit=100) == []
    with refused("EXECUTION_NOT_FOUND"):
        store.history(execution_id)


# -- section 3: the worked example ---------------------------------------------------------------


def test_hand_worked_example(store):
    assert T0 == 1767225600
    admission = store.admit(
        "echo", {"input": "hi"}, execution_id="demo-1", if_exists="use-existing", now=T0
    )
    assert (admission.execution_id, admission.started) == ("demo-1", True)
    page = store.history("demo-1")
    assert page.next_page_token is None
    assert page.items == [
        HistoryEvent(
            1,
            Event("admitted", T0, AdmittedData("demo-1", "echo", {"input": "hi"}, {})),
        )
    ]
    description = store.describe("demo-1")
    assert description.record.status == "admitted"
    assert description.record.admitted_at == T0
    assert description.record.due_at == T0
    assert description.record.history_length == 1
    assert description.history_bytes >= canonical_size(page.items[0].event.data.to_json()) > 0

    # The same start again returns the existing execution and appends nothing.
    again = store.admit(
        "echo", {"input": "hi"}, execution_id="demo-1", if_exists="use-existing", now=T0 + 60
    )
    assert (again.execution_id, again.started) == ("demo-1", False)
    assert history(store, "demo-1") == page.items
    assert store.describe("demo-1").record == description.record
    # ... and it is handed to a worker once.
    assert [d.execution_id for d in store.claim_due(now=T0, limit=10)] == ["demo-1"]
    assert store.claim_due(now=T0 + 1, limit=10) == []


def test_history_bytes_count_encoded_bytes(store):
    params = {"text": "é" * 1000}  # 1000 characters, 2000 bytes in UTF-8
    store.admit("echo", params, execution_id="bytes-1", now=T0)
    assert store.describe("bytes-1").history_bytes >= len(codec.dumps(params).encode("utf-8"))


# -- section 2.4: idempotent start under concurrency ---------------------------------------------


def _admit_demo(store: Any) -> Any:
    return store.admit(
        "echo", {"input": "hi"}, execution_id="demo-1", if_exists="use-existing", now=T0
    )


def _assert_one_execution(store: Any, results: list[Any]) -> None:
    assert len(results) == CONCURRENT
    errors = [r for r in results if isinstance(r, BaseException) or isinstance(r, str)]
    assert errors == []
    assert {r.execution_id for r in results} == {"demo-1"}
    assert sum(r.started for r in results) == 1
    assert [r.execution_id for r in store.list().items] == ["demo-1"]
    assert [e.event.kind for e in history(store, "demo-1")] == ["admitted"]
    assert [d.execution_id for d in store.claim_due(now=T0, limit=100)] == ["demo-1"]
    assert store.verify() == []


@pytest.mark.parametrize("group_commit", [True, False], ids=["group-commit", "direct"])
def test_64_concurrent_identical_starts_in_threads_give_one_execution(store_factory, group_commit):
    store = store_factory(group_commit=group_commit)
    results = Threads(CONCURRENT, lambda i: _admit_demo(store)).results()
    _assert_one_execution(store, results)


def _start_in_process(adapter: Any, location: str, barrier: Any, results: Any) -> None:
    try:
        store = adapter.open(location)
        try:
            barrier.wait(timeout=60)
            results.put(_admit_demo(store))
        finally:
            store.close()
    except BaseException as exc:
        results.put(f"{type(exc).__name__}: {exc}")


def test_64_concurrent_identical_starts_in_processes_give_one_execution(store_factory):
    store_factory().close()  # create and migrate the database before the race
    # fork: spawn would re-import pytest in each of the 64 children (seconds each on 2 cores).
    # Each child opens its own store; nothing opened here crosses the fork.
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(CONCURRENT), ctx.Queue()
    procs = [
        ctx.Process(
            target=_start_in_process,
            args=(store_factory.adapter, store_factory.location, barrier, results),
        )
        for _ in range(CONCURRENT)
    ]
    for p in procs:
        p.start()
    collected = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    _assert_one_execution(store_factory(), collected)


# -- section 2.4 / 2.6: conflicts, validation, limits --------------------------------------------


@pytest.mark.parametrize(
    "workflow, params, context",
    [
        ("echo", {"input": "ho"}, None),
        ("echo", {"input": "hi", "extra": 1}, None),
        ("echo", {}, None),
        ("shout", {"input": "hi"}, None),
        ("echo", {"input": "hi"}, {"trace": "t-2"}),
    ],
    ids=["params", "params-superset", "params-empty", "workflow", "context"],
)
def test_conflicting_start_is_refused_and_appends_nothing(store, workflow, params, context):
    _admit_demo(store)
    before = (store.get("demo-1"), history(store, "demo-1"))
    with refused("EXECUTION_ID_CONFLICT"):
        store.admit(
            workflow,
            params,
            context=AdmissionContext.of(context),
            execution_id="demo-1",
            if_exists="use-existing",
            now=T0 + 1,
        )
    assert (store.get("demo-1"), history(store, "demo-1")) == before
    assert len(store.list().items) == 1


def _params_of_size(n: int, filler: str = "a") -> dict[str, str]:
    """Params whose canonical encoding is exactly `n` bytes: {"x":"..."} is 8 bytes + filler."""
    body = n - len('{"x":""}')
    width = len(filler.encode("utf-8"))
    params = {"x": filler * (body // width) + "a" * (body % width)}
    assert len(codec.dumps(params).encode("utf-8")) == n
    return params


@pytest.mark.parametrize("filler", ["a", "é"], ids=["ascii", "two-byte"])
def test_params_of_exactly_2_mib_are_accepted(store, filler):
    params = _params_of_size(MAX_PARAMS_BYTES, filler)
    assert store.admit("echo", params, execution_id="big", now=T0).started
    assert store.get("big").params_json == codec.dumps(params)


@pytest.mark.parametrize("filler", ["a", "é"], ids=["ascii", "two-byte"])
def test_params_one_byte_over_2_mib_are_refused_and_nothing_is_stored(store, filler):
    params = _params_of_size(MAX_PARAMS_BYTES + 1, filler)
    with refused("INVALID_ARGUMENT"):
        store.admit("echo", params, execution_id="big", now=T0)
    assert_nothing_stored(store, "big")


@pytest.mark.parametrize(
    "params, context",
    [({"x": float("nan")}, None), ({"x": [1, float("nan")]}, None), ({}, {"x": float("nan")})],
    ids=["params", "nested", "context"],
)
def test_invalid_values_are_refused_and_nothing_is_stored(store, params, context):
    with refused("INVALID_EXECUTION_EVENT"):
        store.admit(
            "echo", params, context=AdmissionContext.of(context), execution_id="nan-1", now=T0
        )
    assert_nothing_stored(store, "nan-1")


@pytest.mark.parametrize(
    "execution_id",
    ["corpus/tinystories/v1", "a" * 256, "é" * 128, "with spaces and ✓", "order-42?x=1#y"],
    ids=["path-like", "256-ascii", "256-bytes-utf8", "spaces", "url-chars"],
)
def test_valid_execution_ids_are_accepted(store, execution_id):
    assert store.admit("echo", execution_id=execution_id, now=T0).execution_id == execution_id
    assert store.get(execution_id).execution_id == execution_id
    assert store.describe(execution_id).record.execution_id == execution_id


@pytest.mark.parametrize(
    "execution_id",
    ["a" * 257, "é" * 128 + "a", "", "line\nbreak", "nul\x00", "tab\tid", "bell\x07", "del\x7f"],
    ids=["257-ascii", "257-bytes-utf8", "empty", "newline", "nul", "tab", "bell", "del"],
)
def test_invalid_execution_ids_are_refused_and_nothing_is_stored(store, execution_id):
    with refused("INVALID_ARGUMENT"):
        store.admit("echo", execution_id=execution_id, now=T0)
    assert store.list().items == []


@pytest.mark.parametrize("workflow", ["echo", "charge-order", "a.b_c-1", "X" * 128])
def test_valid_workflow_names_are_accepted(store, workflow):
    admission = store.admit(workflow, execution_id="w-1", now=T0)
    assert store.get(admission.execution_id).workflow == workflow


@pytest.mark.parametrize(
    "workflow",
    ["", "X" * 129, "a/b", "../echo", ".", "..", "sp ace", "é", "new\nline", None],
    ids=[
        "empty",
        "129",
        "slash",
        "parent",
        "dot",
        "dotdot",
        "space",
        "non-ascii",
        "newline",
        "none",
    ],
)
def test_invalid_workflow_names_are_refused_and_nothing_is_stored(store, workflow):
    with refused("INVALID_ARGUMENT"):
        store.admit(workflow, execution_id="w-1", now=T0)
    assert_nothing_stored(store, "w-1")


def test_unknown_if_exists_policy_is_refused(store):
    with refused("INVALID_ARGUMENT"):
        store.admit("echo", execution_id="demo-1", if_exists="replace", now=T0)
    assert_nothing_stored(store, "demo-1")


# -- section 2.5: history pages, describe, verify ------------------------------------------------


def _run_to_completion(store: Any, execution_id: str = "demo-1") -> list[str]:
    """admitted, claimed, step, suspended, wake_requested, claimed, completed."""
    store.admit("echo", {"input": "hi"}, execution_id=execution_id, now=T0)
    (d,) = store.claim_due(now=T0, limit=1, lease_seconds=LEASE)
    store.save_step(
        execution_id, d.token, "say", StepWrite("run", "completed", codec.dumps("hi")), now=T0 + 1
    )
    store.acknowledge(execution_id, d.token, outcome_of({"status": "suspended"}), now=T0 + 2)
    store.request_wake(execution_id, at=T0 + 10, now=T0 + 3)
    (d,) = store.claim_due(now=T0 + 10, limit=1, lease_seconds=LEASE)
    store.acknowledge(
        execution_id, d.token, outcome_of({"status": "completed", "result": "hi"}), now=T0 + 11
    )
    return ["admitted", "claimed", "step", "suspended", "wake_requested", "claimed", "completed"]


def test_history_pages_of_two(store):
    kinds = _run_to_completion(store)
    pages, token = [], None
    while True:
        page = store.history("demo-1", limit=2, page_token=token)
        pages.append([e.seq for e in page.items])
        assert all(e.event.kind == kinds[e.seq - 1] for e in page.items)
        token = page.next_page_token
        if token is None:
            break
    assert pages == [[1, 2], [3, 4], [5, 6], [7]]
    assert store.describe("demo-1").record.history_length == 7


def test_history_from_a_middle_page_token(store):
    kinds = _run_to_completion(store)
    page = store.history("demo-1", limit=2, page_token=history_token(3))
    assert [(e.seq, e.event.kind) for e in page.items] == [(3, kinds[2]), (4, kinds[3])]
    assert parse_history_token(page.next_page_token) == 5
    last = store.history("demo-1", limit=2, page_token=history_token(7))
    assert [e.seq for e in last.items] == [7]
    assert last.next_page_token is None


@pytest.mark.parametrize("token", [None, ""])
def test_empty_history_token_is_event_one(store, token):
    _run_to_completion(store)
    page = store.history("demo-1", limit=3, page_token=token)
    assert [e.seq for e in page.items] == [1, 2, 3]
    assert page.items == store.history("demo-1", limit=3, page_token=history_token(1)).items
    assert parse_history_token(page.next_page_token) == 4


def test_describe_reports_history_length_bytes_and_deliveries(store):
    _run_to_completion(store)
    description = store.describe("demo-1")
    events = history(store, "demo-1")
    assert description.record.status == "completed"
    assert description.record.history_length == len(events) == 7
    assert description.history_bytes >= sum(canonical_size(e.event.data.to_json()) for e in events)
    assert [s.key for s in description.steps] == ["say"]
    assert [(d.attempt, d.outcome) for d in description.deliveries] == [
        (1, "suspended"),
        (2, "completed"),
    ]


def test_verify_is_clean_after_reopening_the_file(store_factory):
    store = store_factory()
    _run_to_completion(store, "done-1")
    store.admit("echo", {"n": 2}, execution_id="waiting-2", now=T0)
    store.claim_due(now=T0 + 100, limit=10, lease_seconds=LEASE)
    assert store.verify() == []
    store = store_factory.reopen(store)
    assert store.verify() == []
    assert store.get("done-1").status == "completed"
    assert store.get("waiting-2").status == "running"


def test_verify_detects_a_tampered_record(store_factory):
    store = store_factory()
    store.admit("echo", {"n": 1}, execution_id="demo-1", now=T0)
    store.admit("echo", {"n": 2}, execution_id="demo-2", now=T0)
    assert store.verify() == []
    store_factory.tamper(store, "demo-1", status="completed")
    problems = store.verify()
    assert len(problems) == 1
    assert "demo-1" in problems[0]


# -- section 2.5: list -------------------------------------------------------------------------


def _admit_list_fixture(store: Any) -> None:
    store.admit("echo", execution_id="e1", now=T0)
    store.admit("echo", execution_id="e2", now=T0 + 1)
    store.admit("echo", execution_id="tie-b", now=T0 + 2)  # same admitted_at: by ID ascending
    store.admit("echo", execution_id="tie-a", now=T0 + 2)
    store.admit("shout", execution_id="s5", now=T0 + 3)
    for d in store.claim_due(now=T0 + 3, limit=100, lease_seconds=LEASE):
        if d.execution_id in ("e1", "tie-a", "s5"):
            store.acknowledge(
                d.execution_id,
                d.token,
                outcome_of({"status": "completed", "result": 1}),
                now=T0 + 4,
            )
        else:
            store.acknowledge(
                d.execution_id, d.token, outcome_of({"status": "suspended"}), now=T0 + 4
            )


def _pages(store: Any, **filters: Any) -> list[list[str]]:
    pages, token = [], None
    while True:
        page = store.list(limit=2, page_token=token, **filters)
        pages.append([r.execution_id for r in page.items])
        token = page.next_page_token
        if token is None:
            return pages


@pytest.mark.parametrize(
    "filters, expected",
    [
        ({}, [["s5", "tie-a"], ["tie-b", "e2"], ["e1"]]),
        ({"workflow": "echo"}, [["tie-a", "tie-b"], ["e2", "e1"]]),
        ({"statuses": ["completed"]}, [["s5", "tie-a"], ["e1"]]),
        ({"statuses": ["suspended"]}, [["tie-b", "e2"]]),
        ({"statuses": ["completed"], "workflow": "echo"}, [["tie-a", "e1"]]),
        ({"statuses": ["suspended", "completed"], "workflow": "shout"}, [["s5"]]),
        ({"statuses": ["failed"]}, [[]]),
        ({"workflow": "nobody"}, [[]]),
    ],
)
def test_list_is_newest_first_in_pages_of_two(store, filters, expected):
    _admit_list_fixture(store)
    assert _pages(store, **filters) == expected


def test_list_refuses_unknown_status_and_bad_tokens(store):
    _admit_list_fixture(store)
    with refused("INVALID_ARGUMENT"):
        store.list(statuses=["sleeping"])
    for token in ("not-a-token", "%%%", history_token(3)):
        with refused("INVALID_ARGUMENT"):
            store.list(limit=2, page_token=token)


# -- section 2.6: not found, bad tokens, page tokens ---------------------------------------------


def test_unknown_execution_is_not_found(store):
    _admit_demo(store)
    with refused("EXECUTION_NOT_FOUND"):
        store.history("demo-2")
    with refused("EXECUTION_NOT_FOUND"):
        store.describe("demo-2")
    with refused("EXECUTION_NOT_FOUND"):
        store.request_wake("demo-2", now=T0)
    assert store.get("demo-2") is None


@pytest.mark.parametrize(
    "token",
    ["%%%", "not base64!", "AAAA", history_token(1) + "AAAA", "AAAAAAAAAAA"],
    ids=["junk", "spaces", "short", "long", "event-0"],
)
def test_malformed_history_tokens_are_invalid_argument(store, token):
    _admit_demo(store)
    with refused("INVALID_ARGUMENT"):
        store.history("demo-1", page_token=token)


def test_history_token_for_event_zero_is_invalid_argument(store):
    _admit_demo(store)
    with refused("INVALID_ARGUMENT"):
        store.history("demo-1", page_token=history_token(0))
    with refused("INVALID_ARGUMENT"):
        parse_history_token(history_token(0))


@pytest.mark.parametrize("limit", [-1, 1001])
def test_out_of_range_page_sizes_are_invalid_argument(store, limit):
    _admit_demo(store)
    with refused("INVALID_ARGUMENT"):
        store.history("demo-1", limit=limit)
    with refused("INVALID_ARGUMENT"):
        store.list(limit=limit)


@settings(max_examples=200, database=None)
@given(st.integers(min_value=1, max_value=2**64 - 1))
def test_page_token_round_trip(n):
    token = history_token(n)
    assert parse_history_token(token) == n
    assert token.isascii() and token.isprintable()


def test_empty_page_token_is_event_one():
    assert parse_history_token("") == 1
    assert parse_history_token(None) == 1


# -- section 2.6: storage exhausted --------------------------------------------------------------


@pytest.mark.parametrize("group_commit", [False, True], ids=["direct", "group-commit"])
def test_full_storage_is_resource_exhausted_and_raising_the_limit_resumes(
    store_factory, group_commit
):
    store = store_factory(group_commit=group_commit)
    store.admit("echo", {"n": 1}, execution_id="small", now=T0)
    big = {"blob": "x" * 200_000}
    store_factory.adapter.limit_space(store, 16 * 1024)
    with refused("RESOURCE_EXHAUSTED"):
        store.admit("echo", big, execution_id="big", now=T0 + 1)
    assert store.get("big") is None
    with refused("EXECUTION_NOT_FOUND"):
        store.history("big")
    assert [r.execution_id for r in store.list().items] == ["small"]
    assert store.verify() == []

    store_factory.adapter.limit_space(store, None)
    assert store.admit("echo", big, execution_id="big", now=T0 + 2).started
    assert store.get("big").params_json == codec.dumps(big)
    assert [e.event.kind for e in history(store, "big")] == ["admitted"]
    assert store.verify() == []


# -- group commit: requests in one batch fail alone ----------------------------------------------


def test_group_commit_a_conflict_in_a_batch_does_not_fail_the_others(store_factory):
    store = store_factory(group_commit=True)
    store.admit("echo", {"n": 0}, execution_id="taken", now=T0)
    before = (store.get("taken"), history(store, "taken"))
    n = 24

    def start(i: int) -> Any:
        execution_id = "taken" if i % 4 == 0 else f"ok-{i}"
        return store.admit("echo", {"n": i}, execution_id=execution_id, now=T0 + 1)

    with store_factory.adapter.hold_writes(store, waiting=n) as batches:
        starting = Threads(n, start)
    results = starting.results()
    assert n in batches  # all n requests were committed in one batch

    for i, result in enumerate(results):
        if i % 4 == 0:
            assert isinstance(result, YsError) and result.code == "EXECUTION_ID_CONFLICT"
        else:
            assert result is not None and not isinstance(result, BaseException), result
            assert (result.execution_id, result.started) == (f"ok-{i}", True)
    listed = {r.execution_id for r in store.list(limit=1000).items}
    assert listed == {"taken"} | {f"ok-{i}" for i in range(n) if i % 4}
    assert (store.get("taken"), history(store, "taken")) == before
    assert store.verify() == []
