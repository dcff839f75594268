"""Concurrency limits in the claim (docs/design.md, "Workflow options" `concurrency`, `key`), per adapter: at most N
leases of a workflow (per value of `params[key]`) at once, counted inside the claim's
transaction; the rest stay due, marked waiting for a slot, until a lease of their group
ends. Time is injected: every call passes `now=`; nothing sleeps."""

from __future__ import annotations

from typing import Any

from tests.support import Threads
from ys.outcomes import outcome_of
from ys.store.base import SLOT_ALL, SLOT_MISSING, ConcurrencyLimit, ScriptOptions
from ys.store.protocols import ConcurrencyWait
from ys.values import StepWrite

T0 = 1_000_000.0
LEASE = 30.0
DONE = {"status": "completed", "result": None}
TWO = {"limited": ConcurrencyLimit(2)}


def admit(
    store: Any, workflow: str, n: int, params: Any = None, prefix: str = "", at: float = T0
) -> list[str]:
    return [
        store.admit(
            workflow, params, execution_id=f"{prefix or workflow}-{i:02}", now=at
        ).execution_id
        for i in range(n)
    ]


LIMITABLE = ("limited", "pay", "free")  # the workflows these tests admit


def record_limits(store: Any, limits: Any) -> None:
    """Record each workflow's limit with its script, as a daemon does (`set_script`): the
    claims of every store on the database read it from there."""
    for workflow in LIMITABLE:
        bound = (limits or {}).get(workflow)
        options = ScriptOptions() if bound is None else ScriptOptions(bound.n, bound.key)
        store.set_script(workflow, "0" * 64, options=options, now=T0)


def claim(store: Any, limits: Any, now: float = T0, limit: int = 10) -> list[Any]:
    record_limits(store, limits)
    return store.claim_due(now=now, limit=limit, lease_seconds=LEASE)


def leased(store: Any) -> set[str]:
    return {r.execution_id for r in store.list(statuses=["running"]).items}


def test_a_limit_leases_at_most_n_and_the_claim_looks_past_the_waiting(store):
    waiting = admit(store, "limited", 5)
    free = admit(store, "free", 3, at=T0 + 0.5)  # due after every limited one
    got = claim(store, TWO, now=T0 + 1, limit=4)
    assert [d.execution_id for d in got] == [*waiting[:2], *free[:2]]
    assert store.slot_waits(waiting + free) == {w: SLOT_ALL for w in waiting[2:]}
    assert {store.get(w).status for w in waiting[2:]} == {"admitted"}
    # the waiting are not due for the dispatcher: the next claimable thing is the free one
    assert [d.execution_id for d in claim(store, TWO, now=T0 + 1)] == [free[2]]
    assert store.next_due_at() == T0 + 1 + LEASE  # only the leases' expiry is ahead
    assert claim(store, TWO, now=T0 + 2) == []


def test_a_slot_frees_when_the_delivery_ends_by_outcome_release_or_lease_expiry(store):
    ids = admit(store, "limited", 5)
    first = {d.execution_id: d for d in claim(store, TWO)}
    assert set(first) == set(ids[:2])
    store.acknowledge(ids[0], first[ids[0]].token, outcome_of(DONE), now=T0 + 1)
    (d2,) = claim(store, TWO, now=T0 + 1)
    assert d2.execution_id == ids[2]
    store.release(ids[1], first[ids[1]].token, retry_at=T0 + 100, now=T0 + 2)
    (d3,) = claim(store, TWO, now=T0 + 2)
    assert d3.execution_id == ids[3]
    assert claim(store, TWO, now=T0 + 3) == []
    # d2's lease expires unrenewed: the claim that sweeps it takes the next waiter
    assert [d.execution_id for d in claim(store, TWO, now=T0 + 1 + LEASE)] == [ids[4]]
    assert leased(store) == {ids[3], ids[4]}


def test_a_suspended_execution_holds_no_slot(store):
    a, b = admit(store, "limited", 2)
    limits = {"limited": ConcurrencyLimit(1)}
    (da,) = claim(store, limits)
    store.save_step(
        a, da.token, "nap", StepWrite("sleep", "waiting", None, wake_at=T0 + 20), now=T0
    )
    store.acknowledge(a, da.token, outcome_of({"status": "suspended"}), now=T0 + 1)
    (db,) = claim(store, limits, now=T0 + 1)
    assert db.execution_id == b
    # a's wake comes while b runs: a waits for the slot; b's outcome frees it for a
    assert claim(store, limits, now=T0 + 20) == []
    assert store.slot_waits([a]) == {a: SLOT_ALL}
    store.acknowledge(b, db.token, outcome_of(DONE), now=T0 + 21)
    assert [d.execution_id for d in claim(store, limits, now=T0 + 21)] == [a]


def test_a_key_limits_each_value_apart_and_a_missing_field_is_a_value_of_its_own(store):
    for account in ("a", "b"):
        admit(store, "pay", 2, {"account": account}, prefix=f"pay-{account}")
    admit(store, "pay", 2, {"other": 1}, prefix="pay-none")
    admit(store, "pay", 1, None, prefix="pay-null")
    limits = {"pay": ConcurrencyLimit(1, key="account")}
    got = sorted(d.execution_id for d in claim(store, limits))
    assert got == ["pay-a-00", "pay-b-00", "pay-none-00"]
    assert store.slot_waits(["pay-a-01", "pay-b-01", "pay-none-01", "pay-null-00"]) == {
        "pay-a-01": '"a"',
        "pay-b-01": '"b"',
        "pay-none-01": SLOT_MISSING,
        "pay-null-00": SLOT_MISSING,
    }


def test_waits_say_the_execution_waits_for_a_concurrency_slot(store):
    admit(store, "limited", 3)
    claim(store, TWO)
    assert store.waits("limited-02") == [ConcurrencyWait("limited", SLOT_ALL)]
    assert store.waits("limited-00") == []


def test_a_changed_script_makes_its_waiters_claimable_again_under_the_new_limit(store):
    ids = admit(store, "limited", 4)
    claim(store, TWO)
    assert claim(store, TWO) == []
    assert store.wake_workflow("limited", now=T0 + 1) == 2  # the registry saw a new script
    raised = {"limited": ConcurrencyLimit(4)}
    assert sorted(d.execution_id for d in claim(store, raised, now=T0 + 1)) == ids[2:]


def test_claims_without_limits_lease_everything_due_as_before(store):
    ids = admit(store, "limited", 4)
    assert sorted(d.execution_id for d in claim(store, None)) == ids


def test_two_stores_on_one_database_claiming_at_once_never_hold_more_than_n(store_factory):
    one = store_factory()
    two = store_factory()
    ids = admit(one, "limited", 12)
    done: list[str] = []
    most = 0
    for rnd in range(40):
        now = T0 + rnd
        stores = (one, two)

        def together(i: int, stores: Any = stores, now: float = now) -> list[Any]:
            return claim(stores[i], TWO, now=now, limit=2)

        got = Threads(2, together).results()
        assert all(isinstance(g, list) for g in got), got
        batch = [d for g in got for d in g]
        most = max(most, len(leased(one)))
        assert len(leased(one)) <= 2, (rnd, [d.execution_id for d in batch])
        for d in batch:
            one.acknowledge(d.execution_id, d.token, outcome_of(DONE), now=now)
            done.append(d.execution_id)
        if len(done) == len(ids):
            break
    assert sorted(done) == ids  # each once, every one in the end
    assert most == 2


def test_one_cancelled_while_waiting_that_never_ran_is_claimed_at_once_to_end_cancelled(store):
    a, b = admit(store, "limited", 2)
    limits = {"limited": ConcurrencyLimit(1)}
    (da,) = claim(store, limits)
    assert store.slot_waits([b]) == {b: SLOT_ALL}
    assert store.cancel(b, now=T0 + 1)
    (db,) = claim(store, limits, now=T0 + 1)  # a still holds the only slot
    assert (db.execution_id, db.cancel_requested, db.cancel_seen) == (b, True, True)
    assert store.slot_waits([b]) == {}
    # it took no slot: a's group is still full for anything else
    (c,) = admit(store, "limited", 1, prefix="late", at=T0 + 1)
    assert claim(store, limits, now=T0 + 2) == []
    assert store.slot_waits([c]) == {c: SLOT_ALL}
    assert da.execution_id == a


def test_recovery_at_start_makes_every_waiter_claimable_under_the_limits_of_now(store):
    ids = admit(store, "limited", 4)
    claim(store, TWO)
    assert len(store.slot_waits(ids)) == 2
    store.release_held(now=T0 + 1)  # the limit was removed while the daemon was down
    assert store.slot_waits(ids) == {}
    assert sorted(d.execution_id for d in claim(store, None, now=T0 + 1)) == ids


# A slot handed to a waiter that then ends without taking it (cancelled, timed out) is not
# lost: the next waiter of its group is claimed (claims heal groups with free slots).
ONE = {"limited": ConcurrencyLimit(1)}


def test_cancel_now_of_the_woken_waiter_does_not_strand_the_next_one(store):
    a, w1, w2 = admit(store, "limited", 3)
    (da,) = claim(store, ONE)
    store.acknowledge(a, da.token, outcome_of(DONE), now=T0 + 1)  # w1's turn
    store.cancel(w1, at_once=True, now=T0 + 2)
    assert [d.execution_id for d in claim(store, ONE, now=T0 + 3)] == [w2]


def test_a_plain_cancel_of_the_woken_waiter_does_not_strand_the_next_one(store):
    a, w1, w2 = admit(store, "limited", 3)
    (da,) = claim(store, ONE)
    store.acknowledge(a, da.token, outcome_of(DONE), now=T0 + 1)
    store.cancel(w1, now=T0 + 2)
    # w1 never ran: it is claimed without a slot (to end cancelled), and w2 takes the slot
    got = {d.execution_id: d for d in claim(store, ONE, now=T0 + 3)}
    assert set(got) == {w1, w2} and got[w1].cancel_seen
    store.acknowledge(w1, got[w1].token, outcome_of({"status": "cancelled"}), now=T0 + 4)
    assert leased(store) == {w2}


def test_the_woken_waiter_timing_out_does_not_strand_the_next_one(store):
    store.set_script("limited", "0" * 64, timeout=10.0, now=T0 - 1)
    a, w1 = admit(store, "limited", 2)
    (w2,) = admit(store, "limited", 1, prefix="late", at=T0 + 5)
    (da,) = claim(store, ONE, now=T0 + 5)
    store.acknowledge(
        a, da.token, outcome_of(DONE), now=T0 + 9.9
    )  # w1's turn, but its deadline comes
    assert store.time_out(w1, now=T0 + 10.1)
    assert [d.execution_id for d in claim(store, ONE, now=T0 + 11.5)] == [w2]


def test_a_long_key_value_names_its_group_by_a_hash_and_wedges_no_claim(store):
    import secrets

    big = secrets.token_hex(4000)  # past what a PostgreSQL index entry may hold
    store.admit("pay", {"account": big}, execution_id="big", now=T0)
    store.admit("pay", {"account": big}, execution_id="big2", now=T0 + 0.5)
    store.admit("other", None, execution_id="plain", now=T0 + 1)
    keyed = {"pay": ConcurrencyLimit(1, key="account")}
    got = sorted(d.execution_id for d in claim(store, keyed, now=T0 + 2))
    assert got == ["big", "plain"]  # big2 is of big's group: it waits


def test_free_held_locks_the_row_then_its_group_once():
    """The order of a lease's end and of `heal` (row, then group): two transactions freeing
    slots never wait for each other's locks (PostgreSQL); the group is locked once."""
    from ys.store.sql import concurrency

    class Cursor:
        def __init__(self, row: Any) -> None:
            self.row = row

        def fetchone(self) -> Any:
            return self.row

    class Dialect:
        for_update = " FOR UPDATE"
        owned_leases = True

        def lock_slot_group(self, c: Any, workflow: str, slot: str) -> None:
            c.calls.append(("group", workflow, slot))

    class Connection:
        dialect = Dialect()

        def __init__(self) -> None:
            self.calls: list[tuple[str, ...]] = []

        def execute(self, sql: str, args: Any = ()) -> Cursor:
            self.calls.append(("sql", sql.split()[0], "FOR UPDATE" in sql))
            return Cursor(("limited", SLOT_ALL))

    c = Connection()
    assert concurrency.free_held(c, "x") is True
    assert c.calls[0] == ("sql", "SELECT", True)  # the row first
    assert [call for call in c.calls if call[0] == "group"] == [("group", "limited", SLOT_ALL)]
    first_group = c.calls.index(("group", "limited", SLOT_ALL))
    assert ("sql", "UPDATE", False) in c.calls[1:first_group]  # its row changed before the group
