"""The value client (durable values that workflows wait for), per adapter and in both commit
modes: versions, deletes, compare-and-set, key and value rules, prefix listing, waiters, and
RFC 001's store-commit row: a put and the wakes of every waiter it satisfies are
all-or-nothing, whether the write fails part-way or the process is killed part-way."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.kv.kv_support import KEY, T0, suspend_waiters
from tests.store.conftest import StoreFactory
from tests.support import REPO
from ys.codec import decode
from ys.errors import InvalidArgument, VersionConflict
from ys.outcomes import outcome_of
from ys.store.protocols import Store, StoredValue, ValueEntry


@pytest.fixture(params=[False, True], ids=["direct", "group-commit"])
def store(request: pytest.FixtureRequest, store_factory: StoreFactory) -> Store:
    """A store with its clock at T0, once with one transaction per write and once with the
    group writer (each write in a shared transaction), as the daemon runs it."""
    return store_factory(group_commit=request.param, clock=lambda: T0)


# -- versions -------------------------------------------------------------------------------


def test_each_put_grows_the_version_by_one(store: Store) -> None:
    for expected in range(1, 6):
        out = store.value_put(KEY, {"n": expected}, now=T0 + expected)
        assert out.version == expected
        assert out.key == KEY and out.updated_at == T0 + expected
        got = store.value_get(KEY)
        assert got == StoredValue(KEY, {"n": expected}, expected, T0 + expected)
    other = store.value_put("approve/order-43", True, now=T0)
    assert other.version == 1  # versions are per key


def test_a_delete_is_a_commit_that_hides_the_key_and_a_later_put_continues_the_version(
    store: Store, store_factory: StoreFactory
) -> None:
    store.value_put(KEY, "a", now=T0)
    store.value_put(KEY, "b", now=T0 + 1)
    store.value_put("approve/order-43", "c", now=T0)

    assert store.value_delete(KEY, now=T0 + 2) is True

    assert store.value_get(KEY) is None
    assert [e.key for e in store.value_list()] == ["approve/order-43"]
    assert [e.key for e in store.value_list("approve/order-42")] == []
    row = store_factory.rows(store, "kv")[0]
    assert row["key"] == KEY and row["version"] == 3 and row["deleted"]  # version 3, deleted
    assert store.value_delete(KEY, now=T0 + 3) is False  # nothing to delete: no commit
    assert store_factory.rows(store, "kv")[0]["version"] == 3
    assert store.value_delete("never/put", now=T0) is False

    out = store.value_put(KEY, "d", now=T0 + 4)
    assert out.version == 4  # versions never go back, so a waiter's "seen" stays valid
    assert store.value_get(KEY) == StoredValue(KEY, "d", 4, T0 + 4)
    assert [e.key for e in store.value_list()] == [KEY, "approve/order-43"]


# -- compare-and-set ------------------------------------------------------------------------


def test_compare_and_set_commits_only_at_the_expected_version(store: Store) -> None:
    assert store.value_put(KEY, "first", expected_version=0, now=T0).version == 1
    with pytest.raises(VersionConflict) as exc:
        store.value_put(KEY, "again", expected_version=0, now=T0)  # 0 = must not exist
    assert exc.value.code == "VERSION_CONFLICT"
    assert exc.value.context["version"] == 1  # tells the caller what to read again
    assert store.value_put(KEY, "second", expected_version=1, now=T0).version == 2
    assert store.value_get(KEY).value == "second"

    store.value_delete(KEY, now=T0)  # version 3, deleted: "does not exist" again
    with pytest.raises(VersionConflict) as exc:
        store.value_put(KEY, "x", expected_version=3, now=T0)
    assert exc.value.context["version"] == 0
    assert store.value_put(KEY, "back", expected_version=0, now=T0).version == 4


def test_a_stale_compare_and_set_is_refused_and_changes_nothing(
    store: Store, store_factory: StoreFactory
) -> None:
    store.value_put(KEY, "v1", now=T0)
    store.value_put(KEY, "v2", now=T0 + 1)
    waiters = suspend_waiters(store, KEY, 3, seen=2, now=T0 + 2)
    before = store_factory.snapshot(store)

    for stale in (0, 1, 3, 99):
        with pytest.raises(VersionConflict) as exc:
            store.value_put(KEY, "v3", expected_version=stale, now=T0 + 5)
        assert exc.value.code == "VERSION_CONFLICT" and exc.value.context["version"] == 2

    assert store_factory.snapshot(store) == before  # value, version, waiters, records, histories
    assert store.value_get(KEY).value == "v2"
    for eid in waiters:
        assert store.get(eid).due_at is None
        assert [w.key for w in store.waits(eid)] == [KEY]

    out = store.value_put(KEY, "v3", expected_version=2, now=T0 + 6)
    assert out.version == 3 and out.woken == 3


# -- keys and values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "approve/order-42",
        "a" * 256,
        "é" * 128,
        "corpus/tinystories/v1",
        "with space",
        "%_*?[]\\",
        "../../etc/passwd",
    ],
    ids=["slash", "256-bytes", "256-bytes-utf8", "path-like", "space", "wildcards", "dots"],
)
def test_a_key_is_any_printable_text_up_to_256_bytes(store: Store, key: str) -> None:
    assert store.value_put(key, 1, now=T0).version == 1
    assert store.value_get(key).value == 1
    assert [e.key for e in store.value_list()] == [key]
    assert store.value_delete(key, now=T0) is True


@pytest.mark.parametrize(
    "key",
    [
        "",
        "a" * 257,
        "é" * 128 + "a",
        "approve\norder-42",
        "nul\x00",
        "tab\there",
        "del\x7f",
        "esc\x1b[0m",
        "\ud800",
        42,
        None,
        b"approve",
    ],
    ids=[
        "empty",
        "257-bytes",
        "257-bytes-utf8",
        "newline",
        "nul",
        "tab",
        "del",
        "escape",
        "lone-surrogate",
        "int",
        "none",
        "bytes",
    ],
)
def test_a_key_that_is_not_a_valid_execution_id_is_refused_and_nothing_is_stored(
    store: Store, store_factory: StoreFactory, key: Any
) -> None:
    eid = store.admit("approval", execution_id="w", now=T0).execution_id
    store.claim_due(now=T0)
    before = store_factory.snapshot(store)

    with pytest.raises(InvalidArgument) as put:
        store.value_put(key, True, now=T0)
    assert put.value.code == "INVALID_ARGUMENT" and "store key" in put.value.message
    with pytest.raises(InvalidArgument):
        store.value_wait(key, eid, "approval", 0, T0 + 60, now=T0)

    assert store_factory.snapshot(store) == before
    assert store.value_list() == []
    assert store.waits(eid) == []


@pytest.mark.parametrize(
    "value",
    [
        math.nan,
        math.inf,
        -math.inf,
        {"amount": math.nan},
        [1, object()],
        {1, 2},
        {1: "int key"},
        b"bytes",
    ],
    ids=["nan", "inf", "-inf", "nested-nan", "object", "set", "int-key", "bytes"],
)
def test_a_value_that_is_not_durable_is_refused_and_nothing_is_stored(
    store: Store, store_factory: StoreFactory, value: Any
) -> None:
    store.value_put(KEY, "kept", now=T0)
    waiters = suspend_waiters(store, KEY, 2, seen=1, now=T0)
    before = store_factory.snapshot(store)

    with pytest.raises(InvalidArgument) as exc:
        store.value_put(KEY, value, now=T0 + 1)
    assert exc.value.code == "INVALID_ARGUMENT"
    with pytest.raises(InvalidArgument):
        store.value_put("approve/order-43", value, now=T0 + 1)

    assert store_factory.snapshot(store) == before  # no version, no wake, no new key
    assert store.value_get(KEY).value == "kept"
    assert store.value_get("approve/order-43") is None
    assert all(store.get(eid).due_at is None for eid in waiters)


def test_durable_values_come_back_as_they_were_put(store: Store) -> None:
    values: list[Any] = [
        True,
        None,
        0,
        -1.5,
        "",
        "naïve ✓",
        [],
        {},
        {"approved": True, "by": ["ana", "bo"], "amount": 12.5, "n": None},
    ]
    for i, value in enumerate(values):
        store.value_put(f"v/{i}", value, now=T0)
        got = store.value_get(f"v/{i}")
        assert got is not None and got.value == value and got.version == 1


# -- listing --------------------------------------------------------------------------------


def test_list_by_prefix_matches_the_prefix_literally_and_case_sensitively(store: Store) -> None:
    keys = [
        "approve/order-42",
        "approve/order-43",
        "Approve/order-44",
        "approvex",
        "a%b",
        "axb",
        "a_c",
        "abc",
        "a*d",
        "a?e",
        "a[f]",
        "a\\g",
        "b",
    ]
    for k in keys:
        store.value_put(k, k, now=T0)

    def listed(prefix: str) -> list[str]:
        return [e.key for e in store.value_list(prefix)]

    assert listed("") == sorted(keys)  # every key, ordered by key
    assert listed("approve/") == ["approve/order-42", "approve/order-43"]
    assert listed("Approve/") == ["Approve/order-44"]
    assert listed("approve") == ["approve/order-42", "approve/order-43", "approvex"]
    assert listed("a%") == ["a%b"]  # % is a character, not "anything"
    assert listed("a_") == ["a_c"]  # _ is a character, not "any one character"
    assert listed("a*") == ["a*d"]
    assert listed("a?") == ["a?e"]
    assert listed("a[") == ["a[f]"]
    assert listed("a\\") == ["a\\g"]
    assert listed("approve/order-42") == ["approve/order-42"]
    assert listed("zzz") == []
    entry = store.value_list("b")[0]
    assert entry == ValueEntry("b", 1, T0)  # no value in a listing


# -- a put wakes its waiters ----------------------------------------------------------------


def test_a_put_wakes_every_waiter_in_its_transaction_and_clears_the_registrations(
    store: Store,
) -> None:
    waiters = suspend_waiters(store, KEY, 3, now=T0)
    bystander = suspend_waiters(store, "approve/order-43", 1, now=T0, prefix="bystander")[0]
    # a waiter that ended meanwhile (cancelled) is skipped, not an error
    ended = suspend_waiters(store, KEY, 1, now=T0, prefix="ended")[0]
    store.cancel(ended, now=T0)
    d = store.claim_due(now=T0)[0]
    assert d.execution_id == ended
    store.acknowledge(ended, d.token, outcome_of({"status": "cancelled"}), now=T0)
    assert store.get(ended).status == "cancelled"

    out = store.value_put(KEY, {"approved": True}, now=T0 + 10)

    assert out.version == 1 and out.woken == 4
    for eid in waiters:
        record = store.get(eid)
        assert record.status == "suspended" and record.due_at == T0 + 10
        assert store.waits(eid) == []
        last = store.events(eid)[-1]
        assert last.kind == "wake_requested" and last.at == T0 + 10
        assert KEY in last.data.reason
    assert store.get(ended).due_at is None and store.get(ended).status == "cancelled"
    assert store.waits(ended) == []
    assert store.get(bystander).due_at is None  # another key's waiter is not woken
    assert [w.key for w in store.waits(bystander)] == ["approve/order-43"]
    assert store.verify() == []  # every record still equals the fold of its history

    due = {d.execution_id for d in store.claim_due(now=T0 + 10, limit=100)}
    assert due == set(waiters)  # each woken execution is delivered once

    again = store.value_put(KEY, {"approved": False}, now=T0 + 11)
    assert again.version == 2 and again.woken == 0  # registrations were cleared


def test_a_delete_wakes_nobody_and_keeps_the_waiters(store: Store) -> None:
    store.value_put(KEY, "v1", now=T0)
    waiters = suspend_waiters(store, KEY, 2, seen=1, now=T0)
    assert store.value_delete(KEY, now=T0 + 1) is True
    for eid in waiters:
        assert store.get(eid).due_at is None
        assert [w.key for w in store.waits(eid)] == [KEY]
    assert store.value_put(KEY, "v3", now=T0 + 2).woken == 2


# -- a wait checks and registers in one transaction -----------------------------------------


@pytest.mark.parametrize("group", [False, True], ids=["direct", "group-commit"])
def test_a_registration_whose_timeout_wake_fails_leaves_no_waiter(
    store_factory: StoreFactory, group: bool
) -> None:
    store = store_factory(group_commit=group, clock=lambda: T0)
    eid = store.admit("approval", execution_id="order-42", now=T0).execution_id
    assert [d.execution_id for d in store.claim_due(now=T0)] == [eid]
    before = store_factory.snapshot(store)

    with store_factory.adapter.fail_on_insert(store, "events", kind="wake_requested"):
        with pytest.raises(Exception, match="injected failure"):
            store.value_wait(KEY, eid, "approval", 0, T0 + 60, now=T0)
    assert store_factory.snapshot(store) == before  # no waiter without its timeout wake
    assert store.waits(eid) == []

    assert store.value_wait(KEY, eid, "approval", 0, T0 + 60, now=T0) is None
    assert [w.key for w in store.waits(eid)] == [KEY]
    assert store.get(eid).due_at == T0 + 60


def test_a_put_racing_the_registration_is_never_missed(store_factory: StoreFactory) -> None:
    """value_wait (check + register) and value_put start at the same moment through the
    group writer, many times: either the wait sees the value, or the put wakes the waiter;
    never neither (and never both)."""
    store = store_factory(group_commit=True, clock=time.time, lease_seconds=3600)
    orders = {"wait-saw-the-value": 0, "put-woke-the-waiter": 0}
    for i in range(200):
        eid = store.admit("approval", execution_id=f"race-{i}").execution_id
        assert eid in {d.execution_id for d in store.claim_due(limit=10)}
        assert store.get(eid).due_at is None  # running, no wake pending
        key = f"approve/race-{i}"
        barrier = threading.Barrier(2, timeout=30)
        out: dict[str, Any] = {}

        def wait(
            eid: str = eid,
            key: str = key,
            barrier: threading.Barrier = barrier,
            out: dict[str, Any] = out,
        ) -> None:
            barrier.wait()
            out["found"] = store.value_wait(key, eid, "approval", 0, None)

        def put(
            i: int = i,
            key: str = key,
            barrier: threading.Barrier = barrier,
            out: dict[str, Any] = out,
        ) -> None:
            barrier.wait()
            out["put"] = store.value_put(key, {"n": i})

        threads = [threading.Thread(target=wait), threading.Thread(target=put)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert "found" in out and "put" in out, (i, out)

        found, woken, due = out["found"], out["put"].woken, store.get(eid).due_at
        if found is not None:
            assert decode(found.value_json) == {"n": i} and found.version == 1
            assert woken == 0 and due is None
            assert store.waits(eid) == []
            orders["wait-saw-the-value"] += 1
        else:
            assert woken == 1 and due is not None, (i, out, due)
            assert store.waits(eid) == []  # the put cleared the registration it satisfied
            orders["put-woke-the-waiter"] += 1
    assert sum(orders.values()) == 200


# -- RFC 001: a store commit and its wakes are all-or-nothing -------------------------------


def _assert_all_or_nothing(
    store: Store, waiters: list[str], put_at: float, before: dict[str, Any], after: dict[str, Any]
) -> str:
    """Either the new version and every waiter's wake (registrations gone), or exactly the
    state before the put. Returns which one."""
    got = store.value_get(KEY)
    if after == before:
        assert got is not None and got.version == 1 and got.value == "old"
        for eid in waiters:
            assert store.get(eid).due_at is None
            assert [w.key for w in store.waits(eid)] == [KEY]
        return "nothing"
    assert got is not None and got.version == 2 and got.value == {"approved": True}
    for eid in waiters:
        record = store.get(eid)
        assert record.due_at is not None and record.due_at <= put_at, (eid, record.due_at)
        assert store.waits(eid) == []
    assert store.verify() == []
    return "all"


def test_a_put_that_fails_part_way_through_its_wakes_leaves_neither_version_nor_wakes(
    store: Store, store_factory: StoreFactory
) -> None:
    store.value_put(KEY, "old", now=T0)
    waiters = suspend_waiters(store, KEY, 3, seen=1, now=T0)
    before = store_factory.snapshot(store)

    # the new version and the first waiter's wake are written; the second wake fails
    with store_factory.adapter.fail_on_insert(store, "events", kind="wake_requested", skip=1):
        with pytest.raises(Exception, match="injected failure"):
            store.value_put(KEY, {"approved": True}, now=T0 + 10)

    after = store_factory.snapshot(store)
    assert after == before
    assert _assert_all_or_nothing(store, waiters, T0 + 10, before, after) == "nothing"

    out = store.value_put(KEY, {"approved": True}, now=T0 + 11)
    assert out.version == 2 and out.woken == 3
    after = store_factory.snapshot(store)
    assert _assert_all_or_nothing(store, waiters, T0 + 11, before, after) == "all"


# A child process that opens the store and puts one value, and SIGKILLs itself part-way:
#   argv: ADAPTER LOCATION KEY NOW GROUP MODE
#   MODE "stmt:N"    -- at the start of the Nth SQL statement of the put (BEGIN .. COMMIT)
#   MODE "waiter:N"  -- when the put requests the wake of its Nth waiter
#   MODE "after"     -- right after the put returned (it has committed)
#   MODE "count"     -- no kill: print how many statements the put ran and exit 0
PUT_CHILD = r"""
import os, signal, sys

from tests.store.adapters import BY_NAME

name, location, key, now, group, mode = sys.argv[1:7]
adapter = BY_NAME[name]
store = adapter.open(location, group_commit=group == "1")
what, _, n = mode.partition(":")
statements, wakes = [], []


def kill():
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def statement(sql):
    statements.append(sql)
    if what == "stmt" and len(statements) == int(n):
        sys.stdout.write(sql.split()[0] + "\n")  # the statement that never ran
        kill()
    if "wake_requested" in sql:
        wakes.append(sql)
        if what == "waiter" and len(wakes) == int(n):
            kill()


with adapter.on_statement(store, statement):
    store.value_put(key, {"approved": True}, now=float(now))
if what == "after":
    kill()
print(len(statements))
store.close()
"""


def _put_child(adapter: str, location: str, group: bool, mode: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            PUT_CHILD,
            adapter,
            location,
            KEY,
            repr(T0 + 10),
            "1" if group else "0",
            mode,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("group", [False, True], ids=["direct", "group-commit"])
def test_a_put_killed_with_sigkill_at_any_point_leaves_all_or_nothing(
    store_factory: StoreFactory, tmp_path: Path, group: bool
) -> None:
    """Power-cut style: a child process puts to a key with several waiters and SIGKILLs
    itself at every statement of the commit in turn (and at each waiter's wake, and right
    after the commit); reopening the database must find all or nothing."""
    adapter = store_factory.adapter
    if group and not adapter.group_commit:
        pytest.skip(f"the {adapter.name} adapter has no group commit")
    n_waiters = 3
    setup = store_factory.fresh()
    template = store_factory.location_of(setup)
    setup.value_put(KEY, "old", now=T0)
    waiters = suspend_waiters(setup, KEY, n_waiters, seen=1, now=T0)
    before = store_factory.snapshot(setup)
    setup.close()  # the last store on it: the database stands alone

    counter = _put_child(adapter.name, adapter.clone(template, tmp_path), group, "count")
    out, err = counter.communicate(timeout=60)
    assert counter.returncode == 0, err
    n_statements = int(out.split()[-1])
    assert n_statements >= 2 + 3 * n_waiters  # BEGIN .. one write per wake at least .. COMMIT

    modes = [f"stmt:{i}" for i in range(1, n_statements + 1)]
    modes += [f"waiter:{i}" for i in range(1, n_waiters + 1)] + ["after"]
    dbs = {mode: adapter.clone(template, tmp_path) for mode in modes}  # each its own database
    children = {mode: _put_child(adapter.name, dbs[mode], group, mode) for mode in modes}
    seen: dict[str, str] = {}
    try:
        for mode, child in children.items():
            out, err = child.communicate(timeout=60)
            assert child.returncode == -9, (mode, child.returncode, err)
            seen[mode] = out.strip()
    finally:
        for child in children.values():
            if child.poll() is None:
                child.kill()
                child.wait()
    for mode, db in dbs.items():
        store = store_factory.open(db)  # a restart: reopen the database and recover
        result = _assert_all_or_nothing(
            store, waiters, T0 + 10, before, store_factory.snapshot(store)
        )
        store.close()
        # Killed before COMMIT ran, the put must be gone; killed after it returned, it must
        # all be there.
        assert result == ("all" if mode == "after" else "nothing"), (mode, seen[mode])
    assert seen["stmt:1"].upper() in ("BEGIN", "SAVEPOINT")
    assert seen[f"stmt:{n_statements}"].upper() in ("COMMIT", "RELEASE")
