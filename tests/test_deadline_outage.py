"""Workflow timeouts while the database is away (docs/design.md, "On PostgreSQL"): a due
deadline that cannot be written is tried again, and the log says the outage once (and once
when timing out works again), not a line per try or per execution."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.support import T0
from ys.daemon.dispatcher import Dispatcher, DispatcherParts, DispatcherTuning
from ys.daemon.limits import Limits
from ys.daemon.running import Running
from ys.daemon.tasks import Background
from ys.errors import DaemonUnavailable
from ys.store import open_store

SHA = "a" * 64


class CutHub:
    """The daemon's hub whose first `fails` calls of `time_out` find the connection cut (as a
    PostgreSQL restart leaves it); every other call reaches the store."""

    def __init__(self, fails: int) -> None:
        self.fails = fails
        self.failed = 0

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if fn.__name__ == "time_out" and self.failed < self.fails:
            self.failed += 1
            raise DaemonUnavailable("DAEMON_UNAVAILABLE", "the connection to PostgreSQL broke")
        return fn(*args, **kwargs)

    def notify(self, execution_id: str, *, may_end: bool = False) -> None:
        pass


def test_deadlines_due_during_an_outage_log_it_once_and_fail_once_it_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path / "ys.db", clock=lambda: T0 + 60)
    store.set_script("job", SHA, timeout=5, now=T0)
    for eid in ("a", "b", "c"):
        store.admit("job", {}, execution_id=eid, now=T0)
    hub = CutHub(fails=4)
    limits = Limits(store, hub, {}, lambda _: None, Background())  # type: ignore[arg-type]

    async def tries() -> list[str]:
        for _ in range(4):  # the dispatcher's rounds while the database is away
            assert await limits.expire_due() is None
        assert await limits.expire_due() == 3  # back
        return [r.execution_id for r in (store.get(e) for e in "abc") if r.status == "failed"]

    try:
        with caplog.at_level(logging.DEBUG, logger="ys.dispatcher"):
            failed = asyncio.run(tries())
    finally:
        store.close()
    assert hub.failed == 4
    assert failed == ["a", "b", "c"]
    said = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(said) == 1, caplog.text
    assert "cannot be reached" in said[0].getMessage()
    assert caplog.text.count("timing out works again") == 1, caplog.text
    assert "could not time out" not in caplog.text and "Traceback" not in caplog.text


def test_a_running_delivery_past_its_deadline_during_an_outage_fails_once_it_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path / "ys.db", clock=lambda: T0 + 60)
    store.set_script("job", SHA, timeout=5, now=T0)
    store.admit("job", {}, execution_id="a", now=T0)
    [d] = store.claim_due(now=T0, limit=1, lease_seconds=300)
    r = Running(d)
    hub = CutHub(fails=3)
    limits = Limits(store, hub, {"a": r}, lambda _: None, Background())  # type: ignore[arg-type]

    async def watch() -> None:
        await asyncio.wait_for(limits.watch_deadline(r), timeout=30)

    try:
        with caplog.at_level(logging.DEBUG, logger="ys.dispatcher"):
            asyncio.run(watch())
        assert store.get("a").status == "failed"
    finally:
        store.close()
    assert hub.failed == 3
    assert r.ended == "timed out"
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1, caplog.text
    assert caplog.text.count("timing out works again") == 1, caplog.text


def test_a_full_dispatcher_finds_the_database_back_and_times_out_again(tmp_path: Path) -> None:
    """At the --concurrency ceiling no claim runs, so the round's read of the next times is
    what finds a lost database back; until then deadlines are not looked for."""
    store = open_store(tmp_path / "ys.db", clock=lambda: T0 + 60)
    store.set_script("job", SHA, timeout=5, now=T0)
    store.admit("job", {}, execution_id="a", now=T0)  # past its deadline, never delivered
    parts = DispatcherParts(store, None, None, None, CutHub(fails=0))  # type: ignore[arg-type]
    d = Dispatcher(parts, DispatcherTuning(concurrency=1))
    d.running["busy"] = None  # type: ignore[assignment]  # the one slot is taken
    d.outage.lost(DaemonUnavailable("DAEMON_UNAVAILABLE", "the connection to PostgreSQL broke"))

    async def rounds() -> None:
        await d._round()  # the database answers the read: back
        assert not d.outage.down
        await d._round()  # deadlines are looked for again

    try:
        asyncio.run(rounds())
        assert store.get("a").status == "failed"
    finally:
        store.close()
