"""The group writer's request and how it is answered, engine-neutral: each adapter's writer
runs the requests in its own transactions (its own discipline), then answers them here."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from ys.store.base import Then

log = logging.getLogger("ys.store")

Inserts = list[tuple[str, tuple[Any, ...]]]


UNSET = object()


class Later:
    """A body's answer read from a statement sent, not yet answered, when the body returns:
    a writer that pipelines (PostgreSQL) sends it with the writes and COMMIT, so it costs no
    round trip of its own, and takes the value (`settle`) once the batch is answered. Only a
    body whose dialect says `pipelined` returns one (docs/design.md, "On PostgreSQL")."""

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[], Any]) -> None:
        self._read = read

    def value(self) -> Any:
        return self._read()


def settle(value: Any) -> Any:
    """A body's answer, a Later's read once its batch is answered."""
    return value.value() if isinstance(value, Later) else value


class Request:
    """One write waiting for the group writer. A thread waits on `done`, a lock held until
    the write is answered (a bare lock is the cheapest one-shot signal between threads); a
    coroutine awaits `future`, settled on its event loop, one call per batch and loop; a
    `then` callback is called on the writer's thread itself (a worker channel's answer: no
    thread hand-off at all)."""

    __slots__ = ("fn", "inserts", "value", "result", "error", "done", "future", "then")

    def __init__(
        self,
        fn: Callable[[Any], Any],
        inserts: Inserts | None,
        value: Any,
        future: asyncio.Future[Any] | None = None,
        then: Then | None = None,
    ) -> None:
        self.fn = fn
        self.inserts = inserts
        self.value = value  # the answer to `inserts`, once committed
        self.result: Any = UNSET
        self.error: BaseException | None = None
        self.future = future
        self.then = then
        self.done: threading.Lock | None = None
        if future is None and then is None:
            self.done = threading.Lock()
            self.done.acquire()

    def wait(self) -> Any:
        assert self.done is not None
        self.done.acquire()
        if self.error is not None:
            raise self.error
        return self.result


def answer(reqs: list[Request]) -> None:
    """Wake the threads, call the callbacks, and settle the futures with one call per event
    loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Request]] = {}
    for req in reqs:
        if req.done is not None:
            req.done.release()
        elif req.then is not None:
            try:
                if req.error is not None:
                    req.then(None, req.error)
                else:
                    req.then(req.result, None)
            except Exception:  # a callback's bug must not stop the writer answering the rest
                log.exception("a write's callback failed")
        else:
            assert req.future is not None
            by_loop.setdefault(req.future.get_loop(), []).append(req)
    for loop, some in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, some)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass


def _settle(reqs: list[Request]) -> None:
    for req in reqs:
        fut = req.future
        assert fut is not None
        if fut.done():  # cancelled by its caller; the write itself stands
            continue
        if req.error is not None:
            fut.set_exception(req.error)
        else:
            fut.set_result(req.result)


def closed_error() -> BaseException:
    from ys.errors import DaemonUnavailable

    return DaemonUnavailable(
        "DAEMON_UNAVAILABLE", "the store is closed (the daemon is stopping); retry when it runs"
    )
