"""The hub: runs store calls off the event loop, and tells long-polls that a record changed."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Hub:
    def __init__(self, threads: int = 32) -> None:
        # Many threads so that concurrent requests reach the group writer together and share
        # one commit; SQLite work never runs on the event loop.
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ys-store")
        self._changed: dict[str, asyncio.Event] = {}  # woken by any change
        self._ended: dict[str, asyncio.Event] = {}  # woken only where it may have ended
        self._any = asyncio.Event()  # woken by a change to any execution (the dashboard)
        self._any_taken = False  # whether anyone took `_any` since it was last set
        self.stopping = False  # the daemon is stopping: long polls answer now

    def stop_waits(self) -> None:
        """Wake every long poll for good: a `ys wait` or `--follow` ends when the daemon stops,
        instead of holding its shutdown until the poll's own timeout."""
        self.stopping = True
        for table in (self._changed, self._ended):
            for ev in table.values():
                ev.set()
            table.clear()
        self._any.set()

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` in the pool: a store call, off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))

    def notify(self, execution_id: str, *, may_end: bool = False) -> None:
        """The execution changed; `may_end` when the change can have made it terminal (an
        outcome, a cancellation, the end of a delivery). A step does not wake `ys wait`."""
        for table in (self._changed, self._ended) if may_end else (self._changed,):
            ev = table.pop(execution_id, None)
            if ev is not None:
                ev.set()
        self._any.set()
        self._any = asyncio.Event()
        self._any_taken = False

    def watched(self, execution_id: str) -> bool:
        """Whether a long poll waits for a change to the execution, so that a change must be
        told (`notify`). Safe from any thread: a poll takes its event before it reads the
        store, so one that this misses reads the change itself."""
        return self._any_taken or execution_id in self._changed

    def watch_any(self) -> asyncio.Event:
        """An event set at the next change to any execution (take it before reading)."""
        self._any_taken = True
        return self._any

    def watch(self, execution_id: str, *, ends_only: bool = False) -> asyncio.Event:
        """An event set at the execution's next change (or, with ends_only, at the next one
        that may end it). Take it *before* reading the record, so a change between the read
        and the wait is never missed."""
        table = self._ended if ends_only else self._changed
        ev = table.get(execution_id)
        if ev is None:
            ev = table[execution_id] = asyncio.Event()
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
