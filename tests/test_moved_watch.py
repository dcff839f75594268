"""A daemon whose database `ys migrate` marks moved while it runs (ys.daemon.moved,
docs/design.md "Keeping and moving the data"): the watch outlives any failure of its read,
says it once, and still sees a later mark; a halted dispatcher starts nothing more."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.support import T0
from ys.daemon.dispatcher import Dispatcher, DispatcherParts, DispatcherTuning
from ys.daemon.moved import MovedWatch
from ys.errors import DatabaseMoved, YsError
from ys.store import open_store


class Hub:
    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def notify(self, execution_id: str, *, may_end: bool = False) -> None:
        pass


class FlakyMark:
    """`moved_to` that fails `fails` times with an error that is no outage, then answers
    None until `marked`, then the target."""

    def __init__(self, fails: int) -> None:
        self.fails = fails
        self.reads = 0
        self.marked = False

    def moved_to(self) -> str | None:
        self.reads += 1
        if self.reads <= self.fails:
            raise YsError("INTERNAL", "the settings row could not be read")
        return "postgresql://elsewhere/ys" if self.marked else None


def test_the_watch_outlives_a_failed_read_says_it_once_and_sees_a_later_mark(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mark = FlakyMark(fails=3)
    seen: list[DatabaseMoved] = []

    async def run() -> None:
        w = MovedWatch(mark, Hub(), "here", seen.append, every=0.001)  # type: ignore[arg-type]
        w.start()
        deadline = asyncio.get_running_loop().time() + 10
        while mark.reads < 6:  # past the failures, answered
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.001)
        mark.marked = True
        while not seen:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.001)
        await w.stop()  # never raises, whatever ended the watch

    with caplog.at_level(logging.INFO, logger="ys.daemon"):
        asyncio.run(run())
    assert [e.message for e in seen] == [DatabaseMoved("here", "postgresql://elsewhere/ys").message]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "looking for a moved mark" in errors[0].getMessage()
    assert caplog.text.count("looking for a moved mark works again") == 1


def test_a_halted_dispatcher_starts_no_delivery_claimed_before_it_halted(tmp_path: Path) -> None:
    store = open_store(tmp_path / "ys.db", clock=lambda: T0)
    store.admit("job", {}, execution_id="a", now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=30)  # a round under way
    parts = DispatcherParts(store, None, None, None, Hub())  # type: ignore[arg-type]
    dispatcher = Dispatcher(parts, DispatcherTuning(concurrency=1))

    async def run() -> dict[str, Any]:
        dispatcher.halt()  # the move is seen
        dispatcher._start(d)  # the round's claims come back
        return dict(dispatcher.running)  # (before the loop's end cancels what it started)

    try:
        assert asyncio.run(run()) == {}
    finally:
        store.close()
