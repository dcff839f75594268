"""The all-executions event stream in the store (`event_stream`), per adapter: every event
once, in commit order, after a cursor; positions survive a reopen and are never reused after
gc; without a cursor it starts at now, or at `since`."""

from __future__ import annotations

import asyncio

import pytest

from ys.errors import YsError
from ys.outcomes import outcome_of

T0 = 1_000_000.0


def drain(store, cursor="0"):
    out = []
    while True:
        items, cursor = store.event_stream(cursor, limit=7)
        if not items:
            return out, cursor
        out += items


def test_events_of_every_execution_come_once_in_commit_order(store):
    store.admit("a", {}, execution_id="x", now=T0)
    store.admit("a", {}, execution_id="y", now=T0 + 1)
    [d] = store.claim_due(now=T0 + 0.5, limit=1, lease_seconds=30)
    store.acknowledge(
        d.execution_id, d.token, outcome_of({"status": "completed", "result": 1}), now=T0 + 2
    )
    got, _ = drain(store)
    assert [(e.execution_id, e.seq, e.event.kind) for e in got] == [
        ("x", 1, "admitted"),
        ("y", 1, "admitted"),
        ("x", 2, "claimed"),
        ("x", 3, "completed"),
    ]
    assert [e.pos for e in got] == sorted({e.pos for e in got})


def test_a_batch_of_the_group_writer_is_streamed_whole(store_factory):
    store = store_factory(group_commit=True)

    async def admit_many() -> None:
        await asyncio.gather(*(store.admit_async("g", {"i": i}, now=T0) for i in range(40)))

    asyncio.run(admit_many())
    got, _ = drain(store)
    assert len(got) == 40 and len({e.execution_id for e in got}) == 40


def test_a_cursor_resumes_after_a_reopen_and_positions_are_not_reused_after_gc(store_factory):
    store = store_factory()
    store.admit("a", {}, execution_id="old", now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=30)
    store.acknowledge("old", d.token, outcome_of({"status": "completed", "result": 1}), now=T0)
    _, cursor = drain(store)
    store = store_factory.reopen(store)
    store.gc(0, now=T0 + 10)
    store.admit("a", {}, execution_id="new", now=T0 + 20)
    got, _ = drain(store, cursor)
    assert [(e.execution_id, e.seq) for e in got] == [("new", 1)]
    assert got[0].pos > int(cursor)
    everything, _ = drain(store)
    assert [e.execution_id for e in everything] == ["new"]  # gc took the old ones


def test_no_cursor_starts_at_now_or_at_since(store):
    store.admit("a", {}, execution_id="before", now=T0)
    items, cursor = store.event_stream()
    assert items == []
    store.admit("a", {}, execution_id="after", now=T0 + 100)
    assert [e.execution_id for e in store.event_stream(cursor)[0]] == ["after"]
    assert [e.execution_id for e in store.event_stream(since=T0 + 50)[0]] == ["after"]


@pytest.mark.parametrize("cursor", ["x", "-1", "1.5", ""])
def test_a_cursor_ys_did_not_give_is_refused(store, cursor):
    with pytest.raises(YsError) as info:
        store.event_stream(cursor)
    assert info.value.code == "INVALID_ARGUMENT"
