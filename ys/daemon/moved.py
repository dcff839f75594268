"""A database `ys migrate` marks moved while a daemon runs on it (on PostgreSQL another box may
run the migration): the daemon looks for the mark every MOVED_CHECK_SECONDS, one read of one
settings row, and once it is there stops delivering at once, so that two databases never both
run the moved executions (docs/design.md, "Keeping and moving the data"). Only on a database
named by `database` (YS_DATABASE): a home's own SQLite file cannot be migrated under its
running daemon, whose lock `ys migrate` takes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ys.daemon.hub import Hub
from ys.daemon.outage import Outage
from ys.errors import DatabaseMoved
from ys.store.protocols import Store

MOVED_CHECK_SECONDS = 5.0
log = logging.getLogger("ys.daemon")


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
            # whatever ended the watch must not stop the daemon's shutdown
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        # any failure of the read (an outage, or an error of the store) is said once and the
        # mark looked for again: a watch that died would let a later move run twice
        trouble = Outage(log, "looking for a moved mark", "looking for a moved mark works again")
        while True:
            await asyncio.sleep(self.every)
            try:
                target = await self.hub.call(self.store.moved_to)
            except Exception as exc:
                trouble.lost(exc)
                continue
            trouble.back()
            if target is not None:
                self.on_moved(DatabaseMoved(self.database, target))
                return
