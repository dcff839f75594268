"""The ends of delivery logs the store keeps (`ys logs` on any box), per adapter:
kept per (execution, attempt) with the daemon that ran it and where its whole log is, cut to
the last LOG_TAIL_BYTES, replaced when the same delivery is kept again, listed in attempt
order, never kept for an execution that does not exist, and pruned by gc with its execution."""

from __future__ import annotations

from ys.outcomes import outcome_of
from ys.store.base import LOG_TAIL_BYTES, LogTail

T0 = 1_000_000.0
DONE = {"status": "completed", "result": None}


def delivered(store, execution_id: str) -> None:
    store.admit("w", {}, execution_id=execution_id, now=T0)
    (d,) = store.claim_due(now=T0 + 1, limit=1, lease_seconds=30)
    store.acknowledge(d.execution_id, d.token, outcome_of(DONE), now=T0 + 2)


def test_a_kept_tail_is_read_back_per_attempt_in_order(store):
    delivered(store, "x")
    store.keep_log_tail("x", 2, daemon_id="b", path="/b/2.log", size=3, tail=b"two", now=T0)
    store.keep_log_tail("x", 1, daemon_id="a", path="/a/1.log", size=5, tail=b"o\xffne", now=T0)
    assert store.log_tails("x") == [
        LogTail(1, "a", "/a/1.log", 5, b"o\xffne", T0),
        LogTail(2, "b", "/b/2.log", 3, b"two", T0),
    ]
    assert store.log_tails("other") == []
    assert store.log_tails("x", attempt=2) == [LogTail(2, "b", "/b/2.log", 3, b"two", T0)]
    assert store.log_tails("x", attempt=3) == []


def test_only_the_last_bytes_are_kept_and_a_second_keep_replaces_the_first(store):
    delivered(store, "x")
    big = b"a" * LOG_TAIL_BYTES + b"the end"
    store.keep_log_tail("x", 1, daemon_id="a", path="/a/1.log", size=len(big), tail=big, now=T0)
    (kept,) = store.log_tails("x")
    assert len(kept.tail) == LOG_TAIL_BYTES and kept.tail.endswith(b"the end")
    assert kept.size == len(big)
    store.keep_log_tail("x", 1, daemon_id="c", path="/c/1.log", size=2, tail=b"hi", now=T0 + 5)
    assert store.log_tails("x") == [LogTail(1, "c", "/c/1.log", 2, b"hi", T0 + 5)]


def test_nothing_is_kept_for_an_execution_that_does_not_exist(store):
    store.keep_log_tail("gone", 1, daemon_id="a", path="/a/1.log", size=1, tail=b"x", now=T0)
    assert store.log_tails("gone") == []


def test_gc_prunes_the_tails_with_their_execution(store):
    delivered(store, "x")
    store.keep_log_tail("x", 1, daemon_id="a", path="/a/1.log", size=1, tail=b"x", now=T0)
    assert store.gc(0, now=T0 + 10) == ["x"]
    assert store.log_tails("x") == []


def test_only_a_database_many_daemons_share_says_so(store_factory, store):
    # the daemon keeps log ends only where another box may ask for them
    assert store.shared is (store_factory.adapter.name == "postgres")
