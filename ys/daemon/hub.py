"""The hub: runs store calls off the event loop, and tells long-polls that a record changed."""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class Hub:
    def __init__(self, threads: int = 32) -> None:
        # Many threads so that concurrent requests reach the group writer together and share
        # one commit; SQLite work never runs on the event loop.
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ys-store")
        self._changed: dict[str, asyncio.Event] = {}

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))

    def notify(self, execution_id: str) -> None:
        ev = self._changed.pop(execution_id, None)
        if ev is not None:
            ev.set()

    def watch(self, execution_id: str) -> asyncio.Event:
        """An event set at the next change of the execution. Take it *before* reading the
        record, so a change between the read and the wait is never missed."""
        ev = self._changed.get(execution_id)
        if ev is None:
            ev = self._changed[execution_id] = asyncio.Event()
        return ev

    @staticmethod
    async def wait(ev: asyncio.Event, timeout: float) -> bool:
        try:
            await asyncio.wait_for(ev.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=False)
