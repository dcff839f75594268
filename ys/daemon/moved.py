"""A database `ys migrate` marks moved while a daemon runs on it (on PostgreSQL another box may
run the migration): the daemon looks for the mark every MOVED_CHECK_SECONDS, one read of one
settings row, and once it is there stops delivering at once, so that two databases never both
run the moved executions (docs/design.md, "Keeping and moving the data"). Only on a database
named by `database` (YS_DATABASE): a home's own SQLite file cannot be migrated under its
running daemon, whose lock `ys migrate` takes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from ys.daemon.hub import Hub
from ys.errors import DaemonUnavailable, DatabaseMoved
from ys.store.protocols import Store

MOVED_CHECK_SECONDS = 5.0


class MovedWatch:
    def __init__(
        self,
        store: Store,
        hub: Hub,
        database: str,
        on_moved: Callable[[DatabaseMoved], None],
        every: float = MOVED_CHECK_SECONDS,
    ) -> None:
        self.store = store
        self.hub = hub
        self.database = database  # as the log shows it (no password)
        self.on_moved = on_moved
        self.every = every
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="moved-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                target = await self.hub.call(self.store.moved_to)
            except DaemonUnavailable:
                continue  # an outage (the store says it): looked for again after it
            if target is not None:
                self.on_moved(DatabaseMoved(self.database, target))
                return
