"""The group writer's engine-neutral half: the queue, the thread that drains it in batches of
at most `batch` requests, the entry points (a blocking write, a coroutine's, one answered by a
callback) and the close. Each adapter's writer adds its transaction discipline only: `_commit`
runs a batch and records each request's result or error (answered here once it returns), and
`_direct` runs one write in its own transaction when there is no group thread."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ys.store.base import Then
from ys.store.sql.requests import Inserts, Request, answer, closed_error

T = TypeVar("T")


class GroupWriter:
    thread_name = "ys-writer"

    def __init__(self, group: bool, batch: int) -> None:
        self.group = group
        self.batch = batch
        self._lock = threading.Lock()  # direct mode: one transaction at a time; group: _closed
        self._closed = False
        self._queue: queue.SimpleQueue[Request | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        # told (seconds, requests) after each group commit, for the metrics; off by default
        self.observe: Callable[[float, int], None] | None = None
        if group:
            self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()

    # -- the adapter's transaction discipline -------------------------------------------------

    def _commit(self, reqs: list[Request]) -> None:
        """Run the batch in the adapter's transactions; set each request's result or error."""
        raise NotImplementedError

    def _direct(self, fn: Callable[[Any], T], inserts: Inserts | None, value: T | None) -> T:
        """Direct mode (no group thread): one write in its own transaction."""
        raise NotImplementedError

    def _closed_down(self) -> None:
        """The writer stopped for good (its thread, if any, is gone)."""

    # -- entry points -------------------------------------------------------------------------

    def write(
        self, fn: Callable[[Any], T], inserts: Inserts | None = None, value: T | None = None
    ) -> T:
        if not self.group:
            return self._direct(fn, inserts, value)
        req = Request(fn, inserts, value)
        self._enqueue(req)
        result: T = req.wait()
        return result

    async def write_async(
        self, fn: Callable[[Any], T], inserts: Inserts | None = None, value: T | None = None
    ) -> T:
        """`write` for a coroutine: the event loop is not blocked, and a batch of writes from
        one loop is answered with one wake-up of that loop, not one thread hand-off each."""
        if not self.group:
            return await asyncio.to_thread(self.write, fn, inserts, value)
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._enqueue(Request(fn, inserts, value, future))
        return await future

    def submit(
        self,
        fn: Callable[[Any], T],
        then: Then,
        inserts: Inserts | None = None,
        value: T | None = None,
    ) -> None:
        """`write` answered by `then(result, error)`, called on the writer's thread once the
        write is committed (or failed): it must be quick and must not block. Direct mode
        calls it before returning."""
        if not self.group:
            try:
                result = self.write(fn, inserts, value)
            except Exception as exc:
                then(None, exc)
                return
            then(result, None)
            return
        self._enqueue(Request(fn, inserts, value, None, then))

    def _enqueue(self, req: Request) -> None:
        with self._lock:
            if self._closed:
                raise closed_error()
            self._queue.put(req)

    def close(self) -> bool:
        """Stop the group writer once the writes queued before now are answered; later writes
        are refused. False if the writer is still busy after 10 s (then keep the connection)."""
        with self._lock:
            if self._closed:
                return self._thread is None
            self._closed = True
            if self._thread is not None:
                self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout=10)
            if self._thread.is_alive():
                return False
            self._thread = None
        self._closed_down()
        return True

    # -- the group thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while (reqs := self._next_batch()) is not None:
            started = time.perf_counter()
            self._settle(reqs)
            if self.observe is not None:
                self.observe(time.perf_counter() - started, len(reqs))

    def _settle(self, reqs: list[Request]) -> None:
        """Commit a batch, then answer each request, only after its fate is committed."""
        try:
            self._commit(reqs)
        finally:
            answer(reqs)

    def _next_batch(self) -> list[Request] | None:
        """The queued requests, at most `batch` of them (waiting for the first); None once
        the writer closes."""
        first = self._queue.get()
        if first is None:
            return None
        reqs = [first]
        while len(reqs) < self.batch:
            try:
                nxt = self._queue.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                self._queue.put(None)
                break
            reqs.append(nxt)
        return reqs
