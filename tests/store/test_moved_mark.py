"""The mark `ys migrate` leaves on its source, per adapter (docs/design.md, "Keeping and moving
the data"): where the data went, kept across a restart beside the records (which stay as they
were), until a migration back into this database clears it."""

from __future__ import annotations

T0 = 1_000_000.0
TARGET = "postgresql://ys:***@db.example/ys"


def test_a_database_is_not_moved_until_marked_and_the_mark_outlives_a_restart(store_factory):
    store = store_factory()
    store.admit("job", {}, execution_id="x", now=T0)
    assert store.moved_to() is None
    before = store_factory.snapshot(store)

    store.mark_moved(TARGET)
    assert store.moved_to() == TARGET
    store = store_factory.reopen(store)
    assert store.moved_to() == TARGET
    assert store_factory.snapshot(store) == before  # the records stay as they were


def test_a_mark_is_replaced_by_the_next_move_and_cleared_by_a_move_back(store_factory):
    store = store_factory()
    store.mark_moved("/elsewhere/ys.db")
    store.mark_moved(TARGET)
    assert store.moved_to() == TARGET
    store.mark_moved(None)
    assert store.moved_to() is None
    store.mark_moved(None)  # nothing to clear: nothing changes
    assert store_factory.reopen(store).moved_to() is None
