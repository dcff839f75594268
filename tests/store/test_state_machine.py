"""The execution client against a plain model, driven by hypothesis with a moving clock.

Rules admit, wake, claim, renew, acknowledge, release, expire leases, write with stale tokens
and restart the store; after every rule the invariants compare the store with the model.
A workflow that suspends always records a sleep step with a wake first (as the SDK does), so
"every open execution has a pending wake or a lease" is a property of the store, not of luck.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ys import codec
from ys.errors import YsError
from ys.outcomes import outcome_of
from ys.store.base import Admission
from ys.values import StepWrite

T0 = 1_000_000.0
LEASE = 30.0
IDS = ["a", "b", "c", "d/e"]
TERMINAL = ("completed", "failed")
OUTCOMES: dict[str, dict[str, Any]] = {
    "suspended": {"status": "suspended"},
    "completed": {"status": "completed", "result": {"receipt": "r-1"}},
    "failed": {"status": "failed", "error": {"name": "CardDeclined", "message": "declined"}},
}


@dataclass
class Model:
    workflow: str
    params_json: str
    due: float | None  # earliest pending wake not covered by the current delivery
    status: str = "admitted"
    prior: str | None = None  # status before the current claim
    covered: float | None = None  # the due time the current delivery covers
    token: str | None = None  # the current lease (live or expired, until released)
    expires: float | None = None
    old_tokens: list[str] = field(default_factory=list)
    outcome: dict[str, Any] | None = None
    attempts: int = 0

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self, factory: Any) -> None:
        super().__init__()
        self.factory = factory
        self.store = factory.fresh()
        self.now = T0
        self.model: dict[str, Model] = {}
        self.first_outcomes: dict[str, dict[str, Any]] = {}
        self.lengths: dict[str, int] = {}

    def teardown(self) -> None:
        self.store.close()

    # -- helpers ------------------------------------------------------------------------------

    def snapshot(self, execution_id: str) -> tuple[Any, ...]:
        s = self.store
        return (
            s.get(execution_id),
            s.history(execution_id, limit=1000).items,
            s.steps(execution_id),
            s.describe(execution_id).lease_expires_at,
        )

    def refused(self, code: str, execution_id: str, write: Any) -> None:
        """`write` must fail with `code` and change nothing about the execution."""
        before = self.snapshot(execution_id)
        try:
            write()
        except YsError as exc:
            assert exc.code == code, exc
        else:
            raise AssertionError(f"expected {code}")
        assert self.snapshot(execution_id) == before

    def live(self, m: Model) -> bool:
        return m.token is not None and m.expires is not None and m.expires > self.now

    def release_expired_in_model(self) -> list[str]:
        released = []
        for execution_id, m in self.model.items():
            if m.token is not None and m.expires is not None and m.expires <= self.now:
                assert m.covered is not None
                m.status, m.prior = m.prior or "admitted", None
                m.due = earliest(m.due, max(m.covered, self.now))
                m.covered = None
                m.old_tokens.append(m.token)
                m.token = m.expires = None
                released.append(execution_id)
        return released

    def end_delivery(self, m: Model) -> None:
        assert m.token is not None
        m.prior = m.covered = m.expires = None
        m.old_tokens.append(m.token)
        m.token = None

    def claimable(self) -> bool:
        """A wake is due now (under a live lease too: it must not be claimed), or a lease has
        expired (claim_due releases it first)."""
        return any(
            (m.due is not None and m.due <= self.now) or (m.token is not None and not self.live(m))
            for m in self.model.values()
        )

    def with_token(self, live: bool | None = None) -> list[str]:
        return sorted(
            e
            for e, m in self.model.items()
            if m.token is not None and (live is None or self.live(m) == live)
        )

    # -- rules --------------------------------------------------------------------------------

    @initialize(count=st.integers(1, len(IDS)))
    def some_admitted(self, count: int) -> None:
        for execution_id in IDS[:count]:
            self.admit(execution_id, "echo", 0, "fail")

    @precondition(lambda self: len(self.model) < 6)
    @rule(
        execution_id=st.sampled_from([*IDS, None]),
        workflow=st.sampled_from(["echo", "shout"]),
        n=st.integers(0, 2),
        if_exists=st.sampled_from(["fail", "use-existing"]),
    )
    def admit(self, execution_id: str | None, workflow: str, n: int, if_exists: str) -> None:
        params = {"n": n}
        params_json = codec.dumps(params)

        def write() -> Admission:
            return self.store.admit(
                workflow, params, execution_id=execution_id, if_exists=if_exists, now=self.now
            )

        if execution_id in self.model:
            m = self.model[execution_id]
            if if_exists == "use-existing" and (m.workflow, m.params_json) == (
                workflow,
                params_json,
            ):
                before = self.snapshot(execution_id)
                assert write() == Admission(execution_id, started=False)
                assert self.snapshot(execution_id) == before
            else:
                self.refused("EXECUTION_ID_CONFLICT", execution_id, write)
            return
        admission = write()
        assert admission.started
        assert execution_id is None or admission.execution_id == execution_id
        assert admission.execution_id not in self.model
        self.model[admission.execution_id] = Model(workflow, params_json, due=self.now)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), delay=st.sampled_from([None, -5.0, 0.0, 10.0, 45.0]))
    def request_wake(self, data: st.DataObject, delay: float | None) -> None:
        # Mostly known executions; sometimes one that does not exist.
        execution_id = data.draw(st.sampled_from([*sorted(self.model) * 3, "ghost"]))
        at = None if delay is None else self.now + delay

        def write() -> str:
            return self.store.request_wake(execution_id, at=at, now=self.now)

        if execution_id not in self.model:
            try:
                write()
            except YsError as exc:
                assert exc.code == "EXECUTION_NOT_FOUND"
            else:
                raise AssertionError("a wake for an unknown execution was accepted")
            assert self.store.get(execution_id) is None
            return
        m = self.model[execution_id]
        if m.terminal:
            before = self.snapshot(execution_id)
            assert write() == "ignored"
            assert self.snapshot(execution_id) == before
            return
        assert write() == "requested"
        m.due = earliest(m.due, self.now if at is None else at)

    @precondition(lambda self: self.claimable())
    @rule(limit=st.integers(1, 3))
    def claim_due(self, limit: int) -> None:
        self.release_expired_in_model()
        due = {
            e: m.due
            for e, m in self.model.items()
            if m.token is None and m.due is not None and m.due <= self.now
        }
        deliveries = self.store.claim_due(now=self.now, limit=limit, lease_seconds=LEASE)
        claimed = [d.execution_id for d in deliveries]
        # As many as allowed, each once, the earliest due first (ties in any order).
        assert len(claimed) == len(set(claimed)) == min(limit, len(due))
        assert set(claimed) <= set(due)
        left = [due[e] for e in due if e not in claimed]
        assert all(due[e] <= t for e in claimed for t in left)
        for d in deliveries:
            m = self.model[d.execution_id]
            assert not m.terminal
            m.prior, m.status = m.status, "running"
            m.covered, m.due = m.due, None
            m.attempts += 1
            m.token, m.expires = d.token, self.now + LEASE
            assert (d.attempt, d.lease_expires_at, d.workflow) == (
                m.attempts,
                m.expires,
                m.workflow,
            )
            assert d.token not in m.old_tokens

    @precondition(lambda self: self.with_token(live=False))
    @rule()
    def recover(self) -> None:
        """The daemon's recovery step: release every expired lease."""
        released = self.store.release_expired(now=self.now)
        assert sorted(released) == sorted(self.release_expired_in_model())

    @precondition(lambda self: self.with_token())
    @rule(data=st.data())
    def renew(self, data: st.DataObject) -> None:
        execution_id = data.draw(st.sampled_from(self.with_token()))
        m = self.model[execution_id]
        token = m.token

        def write() -> float:
            return self.store.renew(execution_id, token, now=self.now, lease_seconds=LEASE)

        if self.live(m):
            assert write() == self.now + LEASE
            m.expires = self.now + LEASE
        else:
            self.refused("LEASE_LOST", execution_id, write)

    @precondition(lambda self: self.with_token())
    @rule(
        data=st.data(),
        outcome=st.sampled_from(sorted(OUTCOMES)),
        sleep=st.sampled_from([1.0, 20.0, 60.0]),
    )
    def acknowledge(self, data: st.DataObject, outcome: str, sleep: float) -> None:
        execution_id = data.draw(st.sampled_from(self.with_token()))
        m = self.model[execution_id]
        token = m.token
        assert token is not None
        store, now = self.store, self.now

        def sleep_step() -> None:
            store.save_step(
                execution_id,
                token,
                f"sleep-{m.attempts}",
                StepWrite("sleep", "waiting", None, wake_at=now + sleep),
                now=now,
            )

        if not self.live(m):  # expired: fenced, even before recovery released it
            self.refused("LEASE_LOST", execution_id, sleep_step)
            self.refused(
                "LEASE_LOST",
                execution_id,
                lambda: store.acknowledge(
                    execution_id, token, outcome_of(OUTCOMES[outcome]), now=now
                ),
            )
            return
        if outcome == "suspended":
            sleep_step()
            m.due = earliest(m.due, now + sleep)
        result = store.acknowledge(execution_id, token, outcome_of(OUTCOMES[outcome]), now=now)
        assert result.to_json() == OUTCOMES[outcome]
        m.status = outcome
        self.end_delivery(m)
        if m.terminal:
            m.outcome, m.due = result.to_json(), None
            self.first_outcomes[execution_id] = result.to_json()

    @precondition(lambda self: self.with_token(live=True))
    @rule(data=st.data(), delay=st.sampled_from([0.0, 5.0, 50.0]))
    def release(self, data: st.DataObject, delay: float) -> None:
        """An infrastructure error: no outcome, the covered wakes due again after `delay`."""
        execution_id = data.draw(st.sampled_from(self.with_token(live=True)))
        m = self.model[execution_id]
        assert m.token is not None and m.covered is not None
        self.store.release(
            execution_id, m.token, retry_at=self.now + delay, reason="crash", now=self.now
        )
        m.status = m.prior or "admitted"
        m.due = earliest(m.due, max(m.covered, self.now + delay))
        self.end_delivery(m)

    @precondition(lambda self: any(m.terminal for m in self.model.values()))
    @rule(data=st.data(), outcome=st.sampled_from(sorted(OUTCOMES)))
    def late_acknowledgement(self, data: st.DataObject, outcome: str) -> None:
        """Any report after a terminal outcome gets that outcome back and changes nothing."""
        execution_id = data.draw(
            st.sampled_from(sorted(e for e, m in self.model.items() if m.terminal))
        )
        m = self.model[execution_id]
        token = data.draw(st.sampled_from(m.old_tokens))
        before = self.snapshot(execution_id)
        result = self.store.acknowledge(
            execution_id, token, outcome_of(OUTCOMES[outcome]), now=self.now
        )
        assert result.to_json() == m.outcome
        assert self.snapshot(execution_id) == before

    @precondition(lambda self: any(m.old_tokens and not m.terminal for m in self.model.values()))
    @rule(
        data=st.data(),
        write=st.sampled_from(["suspended", "completed", "failed", "step", "renew", "release"]),
    )
    def stale_write(self, data: st.DataObject, write: str) -> None:
        execution_id = data.draw(
            st.sampled_from(
                sorted(e for e, m in self.model.items() if m.old_tokens and not m.terminal)
            )
        )
        token = data.draw(st.sampled_from(self.model[execution_id].old_tokens))
        store, now = self.store, self.now

        def attempt() -> object:
            if write in OUTCOMES:
                return store.acknowledge(execution_id, token, outcome_of(OUTCOMES[write]), now=now)
            if write == "step":
                return store.save_step(
                    execution_id,
                    token,
                    "stale",
                    StepWrite("run", "completed", "1", wake_at=now),
                    now=now,
                )
            if write == "renew":
                return store.renew(execution_id, token, now=now, lease_seconds=LEASE)
            return store.release(execution_id, token, retry_at=now, now=now)

        self.refused("LEASE_LOST", execution_id, attempt)

    @rule(seconds=st.sampled_from([1.0, 2.0, 5.0, 10.0, 31.0]))  # expire_lease jumps further
    def tick(self, seconds: float) -> None:
        self.now += seconds

    @precondition(lambda self: self.with_token(live=True))
    @rule(data=st.data())
    def expire_lease(self, data: st.DataObject) -> None:
        m = self.model[data.draw(st.sampled_from(self.with_token(live=True)))]
        assert m.expires is not None
        self.now = m.expires

    @precondition(lambda self: self.model)
    @rule(group_commit=st.booleans())
    def reopen(self, group_commit: bool) -> None:
        self.store = self.factory.reopen(self.store, group_commit=group_commit)

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def one_status_per_execution_as_in_the_model(self) -> None:
        listed = [r.execution_id for r in self.store.list(limit=1000).items]
        assert sorted(listed) == sorted(self.model)
        for execution_id, m in self.model.items():
            record = self.store.get(execution_id)
            assert (record.status, record.due_at, record.attempts) == (m.status, m.due, m.attempts)
            assert (record.workflow, record.params_json) == (m.workflow, m.params_json)
            assert (record.outcome.to_json() if record.outcome else None) == m.outcome
            assert self.store.describe(execution_id).lease_expires_at == m.expires
            assert record.history_length >= self.lengths.get(execution_id, 1)
            self.lengths[execution_id] = record.history_length

    @invariant()
    def terminal_outcomes_never_change(self) -> None:
        for execution_id, outcome in self.first_outcomes.items():
            record = self.store.get(execution_id)
            assert (record.status, record.outcome.to_json()) == (outcome["status"], outcome)
            assert record.due_at is None

    @invariant()
    def at_most_one_live_lease_per_execution(self) -> None:
        """Probe the current token and the two latest old ones: the store accepts exactly the
        live one. The probe renews to the same expiry, so it changes nothing."""
        for execution_id, m in self.model.items():
            tokens = m.old_tokens[-2:] + ([m.token] if m.token else [])
            accepted = []
            for token in tokens:
                keep = m.expires - self.now if token == m.token and self.live(m) else LEASE
                length = self.store.get(execution_id).history_length
                try:
                    expires = self.store.renew(
                        execution_id, token, now=self.now, lease_seconds=keep
                    )
                except YsError as exc:
                    assert exc.code == "LEASE_LOST"
                    assert self.store.get(execution_id).history_length == length
                else:
                    accepted.append(token)
                    assert expires == m.expires
            assert accepted == ([m.token] if self.live(m) else [])

    @invariant()
    def every_open_execution_has_a_wake_or_a_lease(self) -> None:
        for execution_id, m in self.model.items():
            if m.terminal:
                continue
            record = self.store.get(execution_id)
            lease = self.store.describe(execution_id).lease_expires_at
            # An expired lease counts: the next claim or recovery releases it, wakes intact.
            assert record.due_at is not None or lease is not None, execution_id

    @invariant()
    def verify_is_clean(self) -> None:
        assert self.store.verify() == []


# Runs per adapter: each PostgreSQL step is a round trip to a server (50 runs there took 130 s
# of the suite's time); every rule still runs on both.
EXAMPLES = {"sqlite": 50, "postgres": 15}


def test_store_follows_the_model(store_factory):
    run_state_machine_as_test(
        lambda: StoreMachine(store_factory),
        settings=settings(
            max_examples=EXAMPLES.get(store_factory.adapter.name, 50),
            stateful_step_count=30,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
