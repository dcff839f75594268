"""Tasks a part of the daemon starts off a delivery's path: kept referenced until they end
(asyncio holds only a weak reference to a running task), and waited for at shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class Background:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self, timeout: float) -> None:
        """Give what still runs `timeout` seconds to end."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
