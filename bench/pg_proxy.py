"""A counting TCP proxy in front of a PostgreSQL server: bench/pg_side.py's round trips.

    proxy = CountingProxy(url)      # the server's URL (a socket folder in `host=`, or TCP)
    daemon_url = proxy.start()      # the same database through 127.0.0.1:<port>
    before = proxy.turns()
    ...                             # what the daemon does
    proxy.turns() - before          # round trips meanwhile, all connections together
    proxy.close()

A round trip is a turn on one connection: the client sent bytes, then the server answered
(its first bytes after the client's count once, however many packets the answer takes). A
notification the server sends unasked is no turn; a pipelined batch and its answers are one.
The proxy runs on an event loop of its own, in a thread, so the process that uses it (the
bench's client) does not slow it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

CHUNK = 65536


@dataclass
class _Turns:
    asked: bool = False  # the client sent bytes the server has not answered yet


class CountingProxy:
    def __init__(self, url: str) -> None:
        self.url = url
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        host = query.pop("host", None) or parts.hostname or "localhost"
        self.port = int(query.pop("port", None) or parts.port or 5432)
        self.host = unquote(host)
        self._query = query
        self._parts = parts
        self._count = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- what the bench calls ----------------------------------------------------------------

    def start(self) -> str:
        """Listen on 127.0.0.1 (a free port); the URL of the same database through it."""
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="pg-proxy", daemon=True
        )
        self._thread.start()
        ready.wait(10)
        assert self._server is not None, "the proxy did not start"
        port = self._server.sockets[0].getsockname()[1]
        user = self._parts.username or ""
        netloc = f"{user}@127.0.0.1:{port}" if user else f"127.0.0.1:{port}"
        query = urlencode({**self._query, "sslmode": "disable"})
        return urlunsplit((self._parts.scheme, netloc, self._parts.path, query, ""))

    def turns(self) -> int:
        """Round trips so far, over every connection the proxy carried."""
        with self._lock:
            return self._count

    def close(self) -> None:
        if self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._stop)
        self._thread.join(10)
        self._thread = None

    # -- the loop's thread ---------------------------------------------------------------------

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)

        async def listen() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

        self._loop.run_until_complete(listen())
        ready.set()
        self._loop.run_forever()
        self._loop.close()

    def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in self._tasks:
            t.cancel()
        self._loop.call_later(0.1, self._loop.stop)

    async def _upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.host.startswith("/"):  # a socket folder, as libpq names it
            return await asyncio.open_unix_connection(f"{self.host}/.s.PGSQL.{self.port}")
        return await asyncio.open_connection(self.host, self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await self._upstream()
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        turns = _Turns()
        try:
            await asyncio.gather(
                self._pump(reader, up_writer, turns, from_client=True),
                self._pump(up_reader, writer, turns, from_client=False),
            )
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, up_writer):
                with contextlib.suppress(Exception):
                    w.close()
            self._tasks.discard(task)

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, turns: _Turns, from_client: bool
    ) -> None:
        while True:
            data = await src.read(CHUNK)
            if not data:
                with contextlib.suppress(Exception):
                    dst.write_eof()
                return
            if from_client:
                turns.asked = True
            elif turns.asked:
                turns.asked = False
                with self._lock:
                    self._count += 1
            dst.write(data)
            await dst.drain()
