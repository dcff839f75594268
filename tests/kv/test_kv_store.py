"""The durable key-value store in the store layer (SqliteStore directly, on a temp file):
versions, deletes, compare-and-set, key and value rules, prefix listing, and RFC 001's
store-commit row: a put and the wakes of every waiter it satisfies are all-or-nothing, whether
the write fails part-way or the process is killed part-way."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kv_support import KEY, PUT_CHILD, T0, snapshot, suspend_waiters

import ys.store.kv
from ys.errors import InvalidArgument, VersionConflict
from ys.store.sqlite import SqliteStore

# -- versions -------------------------------------------------------------------------------


def test_each_put_grows_the_version_by_one(store: SqliteStore) -> None:
    for expected in range(1, 6):
        out = store.store_put(KEY, {"n": expected}, now=T0 + expected)
        assert out["version"] == expected
        assert out["key"] == KEY and out["updated_at"] == T0 + expected
        got = store.store_get(KEY)
        assert got == {"key": KEY, "value": {"n": expected}, "version": expected,
                       "updated_at": T0 + expected}
    other = store.store_put("approve/order-43", True, now=T0)
    assert other["version"] == 1  # versions are per key


def test_a_delete_is_a_commit_that_hides_the_key_and_a_later_put_continues_the_version(
        store: SqliteStore, db_path: Path) -> None:
    store.store_put(KEY, "a", now=T0)
    store.store_put(KEY, "b", now=T0 + 1)
    store.store_put("approve/order-43", "c", now=T0)

    assert store.store_delete(KEY, now=T0 + 2) is True

    assert store.store_get(KEY) is None
    assert [e["key"] for e in store.store_list()] == ["approve/order-43"]
    assert [e["key"] for e in store.store_list("approve/order-42")] == []
    row = snapshot(db_path)["kv"][0]
    assert row[0] == KEY and row[2] == 3 and row[3] == 1  # version 3, deleted
    assert store.store_delete(KEY, now=T0 + 3) is False  # nothing to delete: no commit
    assert snapshot(db_path)["kv"][0][2] == 3
    assert store.store_delete("never/put", now=T0) is False

    out = store.store_put(KEY, "d", now=T0 + 4)
    assert out["version"] == 4  # versions never go back, so a waiter's "seen" stays valid
    assert store.store_get(KEY) == {"key": KEY, "value": "d", "version": 4,
                                    "updated_at": T0 + 4}
    assert [e["key"] for e in store.store_list()] == [KEY, "approve/order-43"]


# -- compare-and-set ------------------------------------------------------------------------


def test_compare_and_set_commits_only_at_the_expected_version(store: SqliteStore) -> None:
    assert store.store_put(KEY, "first", expected_version=0, now=T0)["version"] == 1
    with pytest.raises(VersionConflict) as exc:
        store.store_put(KEY, "again", expected_version=0, now=T0)  # 0 = must not exist
    assert exc.value.code == "VERSION_CONFLICT"
    assert exc.value.context["version"] == 1  # tells the caller what to read again
    assert store.store_put(KEY, "second", expected_version=1, now=T0)["version"] == 2
    assert store.store_get(KEY)["value"] == "second"

    store.store_delete(KEY, now=T0)  # version 3, deleted: "does not exist" again
    with pytest.raises(VersionConflict) as exc:
        store.store_put(KEY, "x", expected_version=3, now=T0)
    assert exc.value.context["version"] == 0
    assert store.store_put(KEY, "back", expected_version=0, now=T0)["version"] == 4


def test_a_stale_compare_and_set_is_refused_and_changes_nothing(
        store: SqliteStore, db_path: Path) -> None:
    store.store_put(KEY, "v1", now=T0)
    store.store_put(KEY, "v2", now=T0 + 1)
    waiters = suspend_waiters(store, KEY, 3, seen=2, now=T0 + 2)
    before = snapshot(db_path)

    for stale in (0, 1, 3, 99):
        with pytest.raises(VersionConflict) as exc:
            store.store_put(KEY, "v3", expected_version=stale, now=T0 + 5)
        assert exc.value.code == "VERSION_CONFLICT" and exc.value.context["version"] == 2

    assert snapshot(db_path) == before  # value, version, waiters, records, histories
    assert store.store_get(KEY)["value"] == "v2"
    for eid in waiters:
        assert store.get(eid).due_at is None
        assert [w["key"] for w in store.waits(eid)] == [KEY]

    out = store.store_put(KEY, "v3", expected_version=2, now=T0 + 6)
    assert out["version"] == 3 and out["woken"] == 3


# -- keys and values ------------------------------------------------------------------------


@pytest.mark.parametrize("key", [
    "approve/order-42", "a" * 256, "é" * 128, "corpus/tinystories/v1", "with space",
    "%_*?[]\\", "../../etc/passwd",
], ids=["slash", "256-bytes", "256-bytes-utf8", "path-like", "space", "wildcards", "dots"])
def test_a_key_is_any_printable_text_up_to_256_bytes(store: SqliteStore, key: str) -> None:
    assert store.store_put(key, 1, now=T0)["version"] == 1
    assert store.store_get(key)["value"] == 1
    assert [e["key"] for e in store.store_list()] == [key]
    assert store.store_delete(key, now=T0) is True


@pytest.mark.parametrize("key", [
    "", "a" * 257, "é" * 128 + "a", "approve\norder-42", "nul\x00", "tab\there", "del\x7f",
    "esc\x1b[0m", "\ud800", 42, None, b"approve",
], ids=["empty", "257-bytes", "257-bytes-utf8", "newline", "nul", "tab", "del", "escape",
        "lone-surrogate", "int", "none", "bytes"])
def test_a_key_that_is_not_a_valid_execution_id_is_refused_and_nothing_is_stored(
        store: SqliteStore, db_path: Path, key: Any) -> None:
    eid = store.admit("approval", execution_id="w", now=T0).execution_id
    store.claim_due(now=T0)
    before = snapshot(db_path)

    with pytest.raises(InvalidArgument) as put:
        store.store_put(key, True, now=T0)
    assert put.value.code == "INVALID_ARGUMENT" and "store key" in put.value.message
    with pytest.raises(InvalidArgument):
        store.store_wait(key, eid, "approval", 0, T0 + 60, now=T0)

    assert snapshot(db_path) == before
    assert store.store_list() == []
    assert store.waits(eid) == []


@pytest.mark.parametrize("value", [
    math.nan, math.inf, -math.inf, {"amount": math.nan}, [1, object()], {1, 2}, {1: "int key"},
    b"bytes",
], ids=["nan", "inf", "-inf", "nested-nan", "object", "set", "int-key", "bytes"])
def test_a_value_that_is_not_durable_is_refused_and_nothing_is_stored(
        store: SqliteStore, db_path: Path, value: Any) -> None:
    store.store_put(KEY, "kept", now=T0)
    waiters = suspend_waiters(store, KEY, 2, seen=1, now=T0)
    before = snapshot(db_path)

    with pytest.raises(InvalidArgument) as exc:
        store.store_put(KEY, value, now=T0 + 1)
    assert exc.value.code == "INVALID_ARGUMENT"
    with pytest.raises(InvalidArgument):
        store.store_put("approve/order-43", value, now=T0 + 1)

    assert snapshot(db_path) == before  # no version, no wake, no new key
    assert store.store_get(KEY)["value"] == "kept"
    assert store.store_get("approve/order-43") is None
    assert all(store.get(eid).due_at is None for eid in waiters)


def test_durable_values_come_back_as_they_were_put(store: SqliteStore) -> None:
    values: list[Any] = [True, None, 0, -1.5, "", "naïve ✓", [], {},
                         {"approved": True, "by": ["ana", "bo"], "amount": 12.5, "n": None}]
    for i, value in enumerate(values):
        store.store_put(f"v/{i}", value, now=T0)
        got = store.store_get(f"v/{i}")
        assert got is not None and got["value"] == value and got["version"] == 1


# -- listing --------------------------------------------------------------------------------


def test_list_by_prefix_matches_the_prefix_literally_and_case_sensitively(
        store: SqliteStore) -> None:
    keys = ["approve/order-42", "approve/order-43", "Approve/order-44", "approvex",
            "a%b", "axb", "a_c", "abc", "a*d", "a?e", "a[f]", "a\\g", "b"]
    for k in keys:
        store.store_put(k, k, now=T0)

    def listed(prefix: str) -> list[str]:
        return [e["key"] for e in store.store_list(prefix)]

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
    entry = store.store_list("b")[0]
    assert entry == {"key": "b", "version": 1, "updated_at": T0}  # no value in a listing


# -- a put wakes its waiters ----------------------------------------------------------------


def test_a_put_wakes_every_waiter_in_its_transaction_and_clears_the_registrations(
        store: SqliteStore) -> None:
    waiters = suspend_waiters(store, KEY, 3, now=T0)
    bystander = suspend_waiters(store, "approve/order-43", 1, now=T0, prefix="bystander")[0]
    # a waiter that ended meanwhile (cancelled) is skipped, not an error
    ended = suspend_waiters(store, KEY, 1, now=T0, prefix="ended")[0]
    store.cancel(ended, now=T0)
    d = store.claim_due(now=T0)[0]
    assert d.execution_id == ended
    store.acknowledge(ended, d.token, {"status": "cancelled"}, now=T0)
    assert store.get(ended).status == "cancelled"

    out = store.store_put(KEY, {"approved": True}, now=T0 + 10)

    assert out["version"] == 1 and out["woken"] == 4
    for eid in waiters:
        record = store.get(eid)
        assert record.status == "suspended" and record.due_at == T0 + 10
        assert store.waits(eid) == []
        last = store.events(eid)[-1]
        assert last.kind == "wake_requested" and last.at == T0 + 10
        assert KEY in last.data["reason"]
    assert store.get(ended).due_at is None and store.get(ended).status == "cancelled"
    assert store.waits(ended) == []
    assert store.get(bystander).due_at is None  # another key's waiter is not woken
    assert [w["key"] for w in store.waits(bystander)] == ["approve/order-43"]
    assert store.verify() == []  # every record still equals the fold of its history

    due = {d.execution_id for d in store.claim_due(now=T0 + 10, limit=100)}
    assert due == set(waiters)  # each woken execution is delivered once

    again = store.store_put(KEY, {"approved": False}, now=T0 + 11)
    assert again["version"] == 2 and again["woken"] == 0  # registrations were cleared


def test_a_delete_wakes_nobody_and_keeps_the_waiters(store: SqliteStore) -> None:
    store.store_put(KEY, "v1", now=T0)
    waiters = suspend_waiters(store, KEY, 2, seen=1, now=T0)
    assert store.store_delete(KEY, now=T0 + 1) is True
    for eid in waiters:
        assert store.get(eid).due_at is None
        assert [w["key"] for w in store.waits(eid)] == [KEY]
    assert store.store_put(KEY, "v3", now=T0 + 2)["woken"] == 2


# -- RFC 001: a store commit and its wakes are all-or-nothing -------------------------------


def _assert_all_or_nothing(store: SqliteStore, waiters: list[str], put_at: float,
                           before: dict[str, Any], after: dict[str, Any]) -> str:
    """Either the new version and every waiter's wake (registrations gone), or exactly the
    state before the put. Returns which one."""
    got = store.store_get(KEY)
    if after == before:
        assert got is not None and got["version"] == 1 and got["value"] == "old"
        for eid in waiters:
            assert store.get(eid).due_at is None
            assert [w["key"] for w in store.waits(eid)] == [KEY]
        return "nothing"
    assert got is not None and got["version"] == 2 and got["value"] == {"approved": True}
    for eid in waiters:
        record = store.get(eid)
        assert record.due_at is not None and record.due_at <= put_at, (eid, record.due_at)
        assert store.waits(eid) == []
    assert store.verify() == []
    return "all"


def test_a_put_that_fails_part_way_through_its_wakes_leaves_neither_version_nor_wakes(
        store: SqliteStore, db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store.store_put(KEY, "old", now=T0)
    waiters = suspend_waiters(store, KEY, 3, seen=1, now=T0)
    before = snapshot(db_path)
    real = ys.store.kv.request_wake_tx
    woken: list[str] = []

    def request_wake_tx(c: Any, execution_id: str, *args: Any, **kwargs: Any) -> str:
        # the kv row is written and the first waiter's wake requested: now the write fails
        woken.append(execution_id)
        if len(woken) == 2:
            raise OSError("the disk went away")
        return real(c, execution_id, *args, **kwargs)

    monkeypatch.setattr(ys.store.kv, "request_wake_tx", request_wake_tx)
    with pytest.raises(OSError, match="the disk went away"):
        store.store_put(KEY, {"approved": True}, now=T0 + 10)

    assert len(woken) == 2  # it did fail after the new version and one wake were written
    assert snapshot(db_path) == before
    assert _assert_all_or_nothing(store, waiters, T0 + 10, before, snapshot(db_path)) == "nothing"

    monkeypatch.setattr(ys.store.kv, "request_wake_tx", real)
    out = store.store_put(KEY, {"approved": True}, now=T0 + 11)
    assert out["version"] == 2 and out["woken"] == 3
    assert _assert_all_or_nothing(store, waiters, T0 + 11, before, snapshot(db_path)) == "all"


def _put_child(db: Path, group: bool, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", PUT_CHILD, str(db), KEY, repr(T0 + 10), "1" if group else "0",
         mode],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


@pytest.mark.parametrize("group", [False, True], ids=["direct", "group-commit"])
def test_a_put_killed_with_sigkill_at_any_point_leaves_all_or_nothing(
        open_store: Any, tmp_path: Path, group: bool) -> None:
    """Power-cut style: a child process puts to a key with several waiters and SIGKILLs
    itself at every SQL statement of the commit in turn (and at each waiter's wake, and right
    after the commit); reopening the file must find all or nothing."""
    n_waiters = 3
    template = tmp_path / "template.db"
    setup = open_store(path=template)
    setup.store_put(KEY, "old", now=T0)
    waiters = suspend_waiters(setup, KEY, n_waiters, seen=1, now=T0)
    setup.close()  # the last connection: WAL checkpointed, the file stands alone
    before = snapshot(template)

    def fresh(name: str) -> Path:
        db = tmp_path / f"{name}.db"
        db.write_bytes(template.read_bytes())
        return db

    counter = _put_child(fresh("count"), group, "count")
    out, err = counter.communicate(timeout=60)
    assert counter.returncode == 0, err
    n_statements = int(out.split()[-1])
    assert n_statements >= 2 + 3 * n_waiters  # BEGIN .. one write per wake at least .. COMMIT

    modes = [f"stmt:{i}" for i in range(1, n_statements + 1)]
    modes += [f"waiter:{i}" for i in range(1, n_waiters + 1)] + ["after"]
    dbs = {mode: fresh(mode.replace(":", "-")) for mode in modes}
    children = {mode: _put_child(dbs[mode], group, mode) for mode in modes}  # each its own file
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
        store = open_store(path=db)  # a restart: reopen the file and recover the WAL
        result = _assert_all_or_nothing(store, waiters, T0 + 10, before, snapshot(db))
        store.close()
        # Killed before COMMIT ran, the put must be gone; killed after it returned, it must
        # all be there.
        assert result == ("all" if mode == "after" else "nothing"), (mode, seen[mode])
    assert seen["stmt:1"].upper() in ("BEGIN", "SAVEPOINT")
    assert seen[f"stmt:{n_statements}"].upper() in ("COMMIT", "RELEASE")
