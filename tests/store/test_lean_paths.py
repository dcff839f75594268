"""The store's lean paths for a delivery, per adapter and in both writer modes:
a claim reads the run state its worker starts from; an admission may claim its execution in
its own transaction; a step's save, a suspension and an outcome may be answered by a callback
on the writer's thread instead of a waiting caller. Each holds the rules of the slow path:
fenced by the lease, all or nothing, answered only once committed."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from ys import codec
from ys.errors import InvalidArgument, LeaseLost
from ys.outcomes import outcome_of
from ys.store.base import AdmissionContext
from ys.values import StepWrite

T0 = 1_000_000.0
LEASE = 30.0


class Answer:
    """A `then` callback: what it was told, on which thread, once."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.calls = 0

    def __call__(self, result: Any, error: BaseException | None) -> None:
        self.calls += 1
        self.result, self.error = result, error
        self.done.set()

    def wait(self) -> Answer:
        assert self.done.wait(10), "the write was never answered"
        return self


@pytest.fixture
def clocked(store_factory: Any, request: pytest.FixtureRequest) -> Any:
    return store_factory(clock=lambda: T0)


@pytest.fixture(params=[False, True], ids=["direct", "group-commit"])
def store(store_factory: Any, request: pytest.FixtureRequest) -> Any:
    return store_factory(group_commit=request.param, clock=lambda: T0)


def admit(store: Any, eid: str, params: Any = None, **kw: Any) -> Any:
    return store.admit("w", params, execution_id=eid, now=T0, **kw)


def claimed(store: Any, eid: str) -> Any:
    (d,) = [
        d for d in store.claim_due(now=T0, limit=10, lease_seconds=LEASE) if d.execution_id == eid
    ]
    return d


def test_a_claim_reads_the_params_context_and_steps_its_worker_starts_from(store: Any) -> None:
    store.admit(
        "w", {"order": 42}, execution_id="e1", context=AdmissionContext.of({"who": "me"}), now=T0
    )
    d = claimed(store, "e1")
    assert d.state is not None
    assert codec.decode(d.state.params_json) == {"order": 42}
    assert codec.decode(d.state.context_json) == {"who": "me"}
    assert d.state.steps == []
    store.save_step("e1", d.token, "b", StepWrite("run", "completed", "2"), now=T0)
    store.save_step("e1", d.token, "a", StepWrite("sleep", "waiting", None, wake_at=T0 + 5), now=T0)
    store.acknowledge("e1", d.token, outcome_of({"status": "suspended"}), now=T0)
    (again,) = store.claim_due(now=T0 + 5, limit=10, lease_seconds=LEASE)
    assert again.state is not None
    assert [(s.key, s.status, s.value, s.wake_at) for s in again.state.steps] == [
        ("b", "completed", "2", None),
        ("a", "waiting", None, T0 + 5),
    ]  # in the order first recorded


def test_a_claim_delivers_again_at_once_what_its_sweep_released(store: Any) -> None:
    """The sweep of expired leases and the due rows are asked together (docs/design.md, "On
    PostgreSQL"): an execution whose lease the sweep releases is still claimed by the same
    claim, with the steps its last delivery saved, after the executions already due."""
    store.admit("w", None, execution_id="lapsed", now=T0)
    d = claimed(store, "lapsed")
    store.save_step("lapsed", d.token, "a", StepWrite("run", "completed", "1"), now=T0)
    store.admit("w", None, execution_id="waiting", now=T0 + 1)
    out = store.claim_due(now=T0 + LEASE + 1, limit=10, lease_seconds=LEASE)
    assert [x.execution_id for x in out] == ["waiting", "lapsed"]
    again = out[1]
    assert again.attempt == 2 and again.state is not None
    assert [(s.key, s.value) for s in again.state.steps] == [("a", "1")]


def test_an_admission_with_a_lease_is_claimed_in_its_own_transaction(store: Any) -> None:
    admission = asyncio.run(
        store.admit_async("w", {"n": 1}, execution_id="e1", now=T0, lease_seconds=LEASE)
    )
    d = admission.delivery
    assert admission.started and d is not None
    assert (d.execution_id, d.attempt, d.workflow) == ("e1", 1, "w")
    assert d.lease_expires_at == pytest.approx(T0 + LEASE)
    assert d.state is not None and codec.decode(d.state.params_json) == {"n": 1}
    record = store.get("e1")
    assert (record.status, record.attempts) == ("running", 1)
    kinds = [e.kind for e in store.events("e1")]
    assert kinds == ["admitted", "claimed"]
    assert store.claim_due(now=T0, limit=10, lease_seconds=LEASE) == []  # it is leased
    store.save_step("e1", d.token, "s", StepWrite("run", "completed", "1"), now=T0)
    assert (
        store.acknowledge(
            "e1", d.token, outcome_of({"status": "completed", "result": 1}), now=T0
        ).status
        == "completed"
    )


def test_an_admission_that_finds_its_execution_claims_nothing(store: Any) -> None:
    admit(store, "e1", {"n": 1})
    admission = asyncio.run(
        store.admit_async(
            "w", {"n": 1}, execution_id="e1", if_exists="use-existing", now=T0, lease_seconds=LEASE
        )
    )
    assert not admission.started and admission.delivery is None
    assert store.get("e1").status == "admitted"
    assert [d.execution_id for d in store.claim_due(now=T0, limit=10)] == ["e1"]


def test_a_refused_admission_with_a_lease_leaves_nothing(store: Any) -> None:
    admit(store, "e1")
    with pytest.raises(Exception) as info:
        asyncio.run(
            store.admit_async("w", {"other": 1}, execution_id="e1", now=T0, lease_seconds=LEASE)
        )
    assert getattr(info.value, "code", None) == "EXECUTION_ID_CONFLICT"
    assert [e.kind for e in store.events("e1")] == ["admitted"]


def test_a_save_answered_by_its_callback_is_committed_first(store: Any) -> None:
    admit(store, "e1")
    d = claimed(store, "e1")
    answer = Answer()
    store.save_step_then(answer, "e1", d.token, "s1", StepWrite("run", "completed", '"x"'))
    answer.wait()
    assert answer.error is None and answer.result is False and answer.calls == 1
    assert [(s.key, s.value) for s in store.steps("e1")] == [("s1", '"x"')]
    store.cancel("e1", now=T0)
    answer = Answer()
    store.save_step_then(answer, "e1", d.token, "s2", StepWrite("run", "completed", "1"))
    assert answer.wait().result is True  # a cancellation is now requested


def test_a_step_save_does_not_walk_the_history(store_factory: Any) -> None:
    """A step's save asks for the row, its lease and the step, not when the delivery was
    claimed (which walks the execution's events back to its `claimed` one: a cost growing
    with every step before it); the delivery's end still asks for it."""
    store = store_factory(group_commit=True, clock=lambda: T0)
    admit(store, "e1")
    d = claimed(store, "e1")
    for i in range(3):
        store.save_step("e1", d.token, f"s{i}", StepWrite("run", "completed", "1"), now=T0)
    seen: list[str] = []
    with store_factory.adapter.on_statement(store, seen.append):
        store.save_step("e1", d.token, "s3", StepWrite("run", "completed", "1"), now=T0)
        saved = list(seen)
        store.acknowledge("e1", d.token, outcome_of({"status": "completed"}), now=T0)
    assert saved and not [s for s in saved if "FROM events" in s]
    assert [s for s in seen[len(saved) :] if "kind = 'claimed'" in s]
    assert [s.key for s in store.steps("e1")] == ["s0", "s1", "s2", "s3"]


def test_a_save_with_a_stale_token_is_answered_lease_lost_and_writes_nothing(store: Any) -> None:
    admit(store, "e1")
    claimed(store, "e1")
    answer = Answer()
    store.save_step_then(answer, "e1", "not-the-token", "s1", StepWrite("run", "completed", "1"))
    assert isinstance(answer.wait().error, LeaseLost)
    assert store.steps("e1") == []


def test_a_malformed_save_is_refused_at_once(store: Any) -> None:
    admit(store, "e1")
    d = claimed(store, "e1")
    answer = Answer()
    with pytest.raises(InvalidArgument):
        store.save_step_then(
            answer, "e1", d.token, "s1", StepWrite("run", "waiting", None, wake_at=float("nan"))
        )
    assert answer.calls == 0 and store.steps("e1") == []


def test_a_suspension_records_the_waiting_step_and_the_outcome_together(store: Any) -> None:
    admit(store, "e1")
    d = claimed(store, "e1")
    answer = Answer()
    store.suspend_then(
        answer, "e1", d.token, "nap", StepWrite("sleep", "waiting", None, wake_at=T0 + 60)
    )
    assert answer.wait().error is None and answer.result.status == "suspended"
    record = store.get("e1")
    assert (record.status, record.due_at) == ("suspended", T0 + 60)
    assert [(s.key, s.status) for s in store.steps("e1")] == [("nap", "waiting")]
    assert [e.kind for e in store.events("e1")][-2:] == ["step", "suspended"]


def test_a_suspension_with_a_stale_token_writes_neither(store: Any) -> None:
    admit(store, "e1")
    claimed(store, "e1")
    before = [e.kind for e in store.events("e1")]
    answer = Answer()
    store.suspend_then(
        answer, "e1", "stale", "nap", StepWrite("sleep", "waiting", None, wake_at=T0 + 60)
    )
    assert isinstance(answer.wait().error, LeaseLost)
    assert store.steps("e1") == [] and [e.kind for e in store.events("e1")] == before
    assert store.get("e1").status == "running"


def test_a_suspension_of_a_step_that_does_not_wait_is_refused_at_once(store: Any) -> None:
    admit(store, "e1")
    d = claimed(store, "e1")
    answer = Answer()
    with pytest.raises(InvalidArgument, match="waiting step"):
        store.suspend_then(answer, "e1", d.token, "s1", StepWrite("run", "completed", "1"))
    assert answer.calls == 0 and store.steps("e1") == []
    assert store.get("e1").status == "running"


def test_a_saved_step_reads_back_as_the_write_that_saved_it(store: Any) -> None:
    admit(store, "e1")
    d = claimed(store, "e1")
    write = StepWrite("run", "waiting", '"x"', attempts=3, wake_at=T0 + 9)
    store.save_step("e1", d.token, "s1", write, now=T0)
    (saved,) = store.steps("e1")
    assert saved.key == "s1" and saved.write == write


def test_an_outcome_answered_by_its_callback(store: Any) -> None:
    admit(store, "e1")
    d = claimed(store, "e1")
    answer = Answer()
    store.acknowledge_then(
        answer, "e1", d.token, outcome_of({"status": "completed", "result": [1, 2]})
    )
    assert answer.wait().error is None and answer.result.status == "completed"
    assert store.get("e1").outcome.to_json() == {"status": "completed", "result": [1, 2]}
    again = Answer()
    store.acknowledge_then(again, "e1", d.token, outcome_of({"status": "completed", "result": 3}))
    again.wait()  # the first terminal outcome wins and is answered ever after
    assert again.error is None and again.result.result == [1, 2]
    assert store.get("e1").outcome.to_json() == {"status": "completed", "result": [1, 2]}
