"""The registry while the daemon's database is away (docs/design.md, "On PostgreSQL"): a change
the daemon could not record (`on_change` raised DaemonUnavailable) is told again by the next
rescan once it can, and said once, never as a traceback."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from ys.daemon.registry import Registry, Workflow
from ys.errors import DatabaseUnavailable


def test_a_change_not_recorded_while_the_database_is_away_is_told_again_by_a_rescan(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "workflows"
    folder.mkdir(mode=0o700)
    told: list[str] = []
    fails = [2]

    async def on_change(wf: Workflow) -> None:
        if fails[0]:
            fails[0] -= 1
            raise DatabaseUnavailable("DATABASE_UNAVAILABLE", "PostgreSQL cannot be reached")
        told.append(wf.name)

    async def run() -> None:
        registry = Registry(folder, on_change=on_change)
        await registry.load()
        script = folder / "backup.sh"
        script.write_text("#!/bin/sh\necho hi\n")
        script.chmod(0o700)
        with pytest.raises(DatabaseUnavailable):
            await registry.refresh(script)
        assert registry.get("backup") is not None  # listed: only its recording waits
        with pytest.raises(DatabaseUnavailable):
            await registry.rescan()  # still away
        await registry.rescan()  # back
        await registry.rescan()  # told once, not again
        assert told == ["backup"]

    with caplog.at_level(logging.DEBUG, logger="ys.registry"):
        asyncio.run(run())
    assert not any(r.exc_info for r in caplog.records), caplog.text
