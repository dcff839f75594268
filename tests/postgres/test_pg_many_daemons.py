"""What must hold when several daemons share one PostgreSQL database, store by store: three
stores on one database stand for three daemons (each its own writer, pool and lease holder),
their calls released together by a barrier. Each test asserts an invariant, never a time."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from tests.support import T0, Threads, wait_until
from ys.errors import LeaseLost, YsError
from ys.outcomes import outcome_of
from ys.values import StepWrite

LEASE = 30.0


def test_64_identical_admissions_spread_over_three_daemons_make_one_execution(daemons):
    stores = daemons(3, group_commit=True)
    results = Threads(
        64,
        lambda i: stores[i % 3].admit(
            "charge", {"order": 42}, execution_id="order-42", if_exists="use-existing"
        ),
    ).results()
    assert all(not isinstance(r, BaseException) for r in results), results
    assert sum(r.started for r in results) == 1
    assert {r.execution_id for r in results} == {"order-42"}
    assert [r.execution_id for r in stores[0].list().items] == ["order-42"]
    assert [e.kind for e in stores[1].events("order-42")] == ["admitted"]


def test_daemons_claiming_together_deliver_each_execution_once(daemons):
    stores = daemons(3, group_commit=True)
    for i in range(60):
        stores[i % 3].admit("work", {"i": i}, execution_id=f"e{i:02}")
    claims: list[list[Any]] = [[] for _ in stores]

    def drain(i: int) -> None:
        while batch := stores[i].claim_due(now=T0, limit=4, lease_seconds=LEASE):
            claims[i].extend(batch)

    Threads(3, drain).results()
    ids = Counter(d.execution_id for batch in claims for d in batch)
    assert sorted(ids) == [f"e{i:02}" for i in range(60)] and set(ids.values()) == {1}
    assert stores[0].verify() == []


def test_a_stopped_daemon_is_fenced_once_another_swept_its_expired_lease(daemons):
    a, b = daemons(2)
    a.admit("work", {}, execution_id="x", now=T0)
    (old,) = a.claim_due(now=T0, lease_seconds=LEASE)
    later = T0 + LEASE + 1  # a was stopped past its lease (SIGSTOP); b claims, sweeping it
    (new,) = b.claim_due(now=later, lease_seconds=LEASE)
    assert new.execution_id == "x" and new.token != old.token and new.attempt == 2
    before = b.events("x")
    for write in (
        lambda: a.renew("x", old.token, now=later),
        lambda: a.save_step("x", old.token, "s", StepWrite("run", "completed", "1"), now=later),
        lambda: a.acknowledge(
            "x", old.token, outcome_of({"status": "completed", "result": 1}), now=later
        ),
        lambda: a.release("x", old.token, now=later),
    ):
        with pytest.raises(LeaseLost):
            write()
    assert b.events("x") == before  # the woken daemon wrote nothing
    kinds = [e.kind for e in before]
    assert kinds == ["admitted", "claimed", "released", "claimed"]
    assert before[2].data.reason == "lease_expired"
    assert (
        b.acknowledge(
            "x", new.token, outcome_of({"status": "completed", "result": 2}), now=later
        ).result
        == 2
    )


def test_recovery_sees_only_the_leases_its_own_daemon_holds(daemons):
    a, b = daemons(2)
    for i in range(4):
        a.admit("work", {}, execution_id=f"e{i}", now=T0)
    mine = a.claim_due(now=T0, limit=2, lease_seconds=LEASE)
    theirs = b.claim_due(now=T0, limit=2, lease_seconds=LEASE)
    assert sorted(a.held_leases()) == sorted((d.execution_id, d.token) for d in mine)
    assert sorted(b.held_leases()) == sorted((d.execution_id, d.token) for d in theirs)
    (again,) = daemons(1)  # lease holder d0 again: daemon a restarted
    assert sorted(again.held_leases()) == sorted((d.execution_id, d.token) for d in mine)
    later = T0 + LEASE + 1  # b's leases have expired too: still not a start's to release
    assert sorted(again.release_held(now=later)) == sorted(d.execution_id for d in mine)
    assert again.held_leases() == []
    assert sorted(b.held_leases()) == sorted((d.execution_id, d.token) for d in theirs)
    for d in mine:
        assert [e.data.to_json().get("reason") for e in again.events(d.execution_id)][
            -1
        ] == "daemon_restarted"


def test_a_put_on_one_daemon_always_wakes_a_wait_registered_on_another(daemons):
    a, b = daemons(2)
    rounds = 20
    for i in range(rounds):
        a.admit("approve", {}, execution_id=f"w{i}", now=T0)
    a_claims = {d.execution_id: d for d in a.claim_due(now=T0, limit=rounds, lease_seconds=LEASE)}
    assert len(a_claims) == rounds
    for i in range(rounds):  # the wait and the put of one key race, each round
        waited, put = Threads(
            2,
            lambda j, i=i: (
                a.value_wait(f"k{i}", f"w{i}", "approval", seen=0, now=T0 + 1)
                if j == 0
                else b.value_put(f"k{i}", "yes", now=T0 + 1)
            ),
        ).results()
        # either the wait saw the value, or the put found the waiter and woke it
        record = a.get(f"w{i}")
        assert waited is not None or put.woken == 1, (i, waited, put)
        assert waited is not None or record.due_at is not None, (i, waited, put, record)


def test_one_start_of_a_step_from_two_daemons_is_one_child(daemons):
    a, b = daemons(2)
    a.admit("parent", {}, execution_id="p", now=T0)
    results = Threads(
        8, lambda i: (a, b)[i % 2].start("p", "ship", "ship-order", '{"order":1}', now=T0)
    ).results()
    assert all(isinstance(r, str) for r in results), results
    assert len(set(results)) == 1
    assert [r.execution_id for r in a.list(parent="p").items] == [results[0]]


def test_first_begins_of_one_effect_on_two_daemons_make_one_record(daemons):
    a, b = daemons(2)
    a.admit("pay", {}, execution_id="p", now=T0)
    results = Threads(
        8,
        lambda i: (a, b)[i % 2].effect_begin(
            "charge.v1", "shop:charge:1", {"amount": 5}, "p", "charge", now=T0
        ),
    ).results()
    assert Counter(r.status for r in results) == {"new": 1, "pending": 7}, results
    with pytest.raises(YsError) as err:
        b.effect_begin("charge.v1", "shop:charge:1", {"amount": 6}, "p", "charge", now=T0)
    assert err.value.code == "EFFECT_REQUEST_MISMATCH"


def test_a_schedule_ticked_by_three_daemons_fires_each_slot_once(daemons):
    stores = daemons(3)
    stores[0].schedule_add("beat", "tick", "* * * * *", tz="UTC", overlap="allow", now=T0)
    for minute in range(1, 6):
        now = T0 + 60 * minute
        Threads(3, lambda i, now=now: stores[i].schedule_tick("beat", now=now)).results()
    ids = sorted(r.execution_id for r in stores[0].list(workflow="tick").items)
    assert len(ids) == len(set(ids)) == 5, ids
    assert all(i.startswith("beat@") for i in ids)


def test_a_daemon_hears_another_daemons_admission(daemons):
    a, b = daemons(2)
    heard = threading.Event()
    a.watch(heard.set)
    wait_until(heard.is_set, message="the first poll")  # the listener runs
    heard.clear()
    b.admit("work", {}, execution_id="x")
    wait_until(heard.is_set, message="a notification (or the 1 s poll) on daemon a")


def test_a_daemon_hears_each_change_of_another_daemons_execution_with_its_status(daemons):
    """The status comes with the notification, so a `ys wait` on the hearing daemon reads
    the record again only where it ended, not at each step (ys/daemon/main.py)."""
    a, b = daemons(2)
    heard: list[tuple[str, str]] = []
    b.watch(lambda: None, lambda execution_id, status: heard.append((execution_id, status)))
    a.admit("work", {}, execution_id="x")
    (d,) = a.claim_due(now=T0, limit=1, lease_seconds=LEASE)
    for i in range(3):
        a.save_step("x", d.token, f"s{i}", StepWrite("step", "completed", str(i)), now=T0)
    a.acknowledge("x", d.token, outcome_of({"status": "completed", "result": None}), now=T0)
    wait_until(lambda: ("x", "completed") in heard, message="the end heard on daemon b")
    assert set(heard) == {("x", "running"), ("x", "completed")}, heard
    assert heard.count(("x", "running")) >= 4 and heard[-1] == ("x", "completed"), heard


def test_gc_on_one_daemon_while_another_writes_keeps_everything_consistent(daemons):
    a, b = daemons(2)
    for i in range(20):
        a.admit("work", {}, execution_id=f"old{i}", now=T0)
        (d,) = a.claim_due(now=T0, limit=1, lease_seconds=LEASE)
        a.acknowledge(
            d.execution_id, d.token, outcome_of({"status": "completed", "result": i}), now=T0
        )

    def work(i: int) -> Any:
        if i == 0:
            return a.gc(60, now=T0 + 3600)
        return b.admit("work", {}, execution_id=f"new{i}", now=T0 + 3600)

    results = Threads(6, work).results()
    assert sorted(results[0]) == sorted(f"old{i}" for i in range(20))
    assert sorted(r.execution_id for r in a.list().items) == [f"new{i}" for i in range(1, 6)]
    assert a.verify() == []


def _advisory_waits(url: str) -> int:
    from ys.store.postgres import connect

    with connect(url) as conn:
        return int(
            conn.execute(
                "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).fetchone()[0]
        )


def test_the_event_stream_follows_commit_order_across_daemons(daemons, pg_url):
    """A daemon's transaction that appended an event and has not committed yet, while another
    daemon commits one: a reader between the two commits must still get both, once each, in
    the order they committed (a position drawn before commit must not be skipped)."""
    from ys.store.sql.executions import request_wake_tx

    a, b = daemons(2)
    a.admit("wf", {}, execution_id="x", now=T0)
    _, start = a.event_stream()
    appended, hold = threading.Event(), threading.Event()

    def slow(c: Any) -> None:  # b's transaction: an event appended, the commit held back
        request_wake_tx(c, "x", T0 - 5, T0 + 1)  # earlier than its due time: a new wake
        appended.set()
        hold.wait(timeout=30)

    slow_write = threading.Thread(target=b.core.write, args=(slow,))
    slow_write.start()
    try:
        wait_until(appended.is_set, timeout=10, message="b's event appended")
        fast_write = threading.Thread(
            target=lambda: a.admit("wf", {}, execution_id="y", now=T0 + 2)
        )
        fast_write.start()
        # a's admission either waits behind b's transaction (appends in commit order) or
        # commits first; either way a reader looks now, before b commits
        wait_until(
            lambda: not fast_write.is_alive() or _advisory_waits(pg_url) > 0,
            timeout=10,
            message="a's admission committed or waiting",
        )
        seen, cursor = a.event_stream(start)
    finally:
        hold.set()
        slow_write.join(timeout=30)
    fast_write.join(timeout=30)
    more, _ = a.event_stream(cursor)
    got = [(e.execution_id, e.event.kind) for e in seen + more]
    assert got == [("x", "wake_requested"), ("y", "admitted")]


def test_retries_of_one_execution_from_three_daemons_at_once_take_distinct_ids(daemons):
    stores = daemons(3)
    a = stores[0]
    a.admit("pay", {"n": 1}, execution_id="p", now=T0)
    (d,) = a.claim_due(now=T0, limit=1, lease_seconds=LEASE)
    a.save_step("p", d.token, "one", StepWrite("run", "completed", "1"), now=T0)
    a.acknowledge(
        "p", d.token, outcome_of({"status": "failed", "error": {"name": "E", "message": "x"}})
    )
    results = Threads(9, lambda i: stores[i % 3].retry("p", now=T0 + 1)).results()
    assert all(not isinstance(r, BaseException) for r in results), results
    assert sorted(r.execution_id for r in results) == sorted(f"p.r{n}" for n in range(1, 10))
    for r in results:  # each with its one copied step, in its own transaction
        assert [s.key for s in a.steps(r.execution_id)] == ["one"]
        assert a.get(r.execution_id).retry_of == "p"
    assert a.verify() == []
