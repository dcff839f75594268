"""The scheduler while its database is away (a PostgreSQL restart: docs/design.md, "On
PostgreSQL"): its store calls that fail are tried again within seconds, and the log says
nothing more than the store's own line about the outage, never a traceback."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ys.daemon.scheduler import Scheduler
from ys.errors import DatabaseUnavailable
from ys.store import open_store


class LostHub:
    """The daemon's hub whose first `fails` store calls find the database gone, as a
    restart leaves it, and whose later calls reach the store."""

    def __init__(self, fails: int) -> None:
        self.fails = fails
        self.failed = 0

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self.failed < self.fails:
            self.failed += 1
            raise DatabaseUnavailable(
                "DATABASE_UNAVAILABLE", "the connection to PostgreSQL broke; retry"
            )
        return await asyncio.to_thread(fn, *args, **kwargs)


async def _until(predicate: Any, timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        await asyncio.sleep(0.02)


def test_a_housekeeping_that_finds_the_database_gone_runs_again_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path / "ys.db")
    hub = LostHub(fails=3)
    parts = SimpleNamespace(
        store=store, hub=hub, paths=SimpleNamespace(data=tmp_path, log_dir=lambda _: tmp_path)
    )

    async def run() -> None:
        scheduler = Scheduler(parts)
        scheduler.start()
        try:
            # the next tick is MAX_IDLE (30 s) away unless the outage tries again sooner
            await _until(
                lambda: store.setting("last_gc_at") is not None,
                timeout=10,
                message="the daily housekeeping to be done once the database answers",
            )
        finally:
            await scheduler.stop()

    try:
        with caplog.at_level(logging.DEBUG, logger="ys.scheduler"):
            asyncio.run(run())
    finally:
        store.close()
    assert hub.failed == 3
    scheduler_lines = [r for r in caplog.records if r.name == "ys.scheduler"]
    assert not any(r.exc_info for r in scheduler_lines), caplog.text
    assert not any(r.levelno >= logging.WARNING for r in scheduler_lines), caplog.text
