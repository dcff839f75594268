"""A delivery's output: its processes write into pipes, the daemon copies the pipes into the
delivery's log, capped.

The daemon, not the worker, writes the log, so the cap holds whatever the script prints (and
whatever it starts prints), and a worker killed mid-line loses nothing that reached the pipe.
Past the cap (`log_max_bytes`, default 10 MiB; ys.settings) the log keeps its head, as it was written, and
its tail, kept in memory and written when the worker reports its outcome or the delivery ends,
after a marker line that says how many bytes were dropped between them. When each line came
is kept beside the log (ys.logtimes), so the log stays exactly what was printed.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from ys.logtimes import TimesWriter

log = logging.getLogger("ys.capture")

DEFAULT_LOG_MAX_BYTES = 10 * 1024 * 1024
MIN_LOG_MAX_BYTES = 1024
TAIL_MAX = 1024 * 1024  # the tail is held in memory until the delivery ends: at most this
MARKER_ROOM = 200  # bytes kept free for the marker line
LATE_ROOM = 100  # and for the line that counts what came after the outcome and did not fit


class CappedLog:
    """One delivery's log file, at most `limit` bytes. Not thread-safe: fed on the loop."""

    def __init__(self, path: Path, limit: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self._fd: int | None = fd
        self.limit = limit
        self.tail_room = min(TAIL_MAX, limit // 4)
        self.head_room = limit - self.tail_room - MARKER_ROOM
        self.head = os.fstat(fd).st_size  # bytes written (a file already there counts)
        self.total = self.head  # bytes received, written or not
        self._times = TimesWriter(path)
        # the tail's chunks with the time each came, written at the seal with those times
        self._tail: collections.deque[tuple[float, bytes]] = collections.deque()
        self._tail_size = 0
        self._sealed = False
        self._late = 0  # bytes that came after the seal and did not fit
        self.size = self.head  # bytes in the file
        self._ends_line = True  # whether what the file holds ends with a newline
        self.path = path

    def write(self, data: bytes) -> None:
        now = time.time()
        if self._sealed:
            room = max(0, self.limit - self.size - LATE_ROOM)
            self._write(data[:room], now)
            self._late += max(0, len(data) - room)
            return
        self.total += len(data)
        if not self._tail:
            room = self.head_room - self.head
            if len(data) <= room:
                self._write(data, now)
                self.head += len(data)
                return
            # The head ends at a line's end when this chunk has one before the cap; only a
            # line longer than all that is left is cut.
            cut = data.rfind(b"\n", 0, room) + 1 if room > 0 else 0
            if cut == 0 and not self._ends_line:
                cut = max(0, room)
            self._write(data[:cut], now)
            self.head += cut
            data = data[cut:]
        self._tail.append((now, data))
        self._tail_size += len(data)
        while self._tail_size - len(self._tail[0][1]) >= self.tail_room:
            self._tail_size -= len(self._tail.popleft()[1])

    def seal(self) -> None:
        """Write the tail now (after the marker, if anything was dropped): the log is whole
        as of now (the worker reported its outcome; `ys wait` may return). What still comes
        is appended while the file stays under the cap and counted at close beyond it."""
        if self._sealed:
            return
        self._sealed = True
        chunks = list(self._tail)
        self._tail.clear()
        joined = b"".join(data for _, data in chunks)
        cut = max(0, len(joined) - self.tail_room)
        tail = joined[cut:]
        if self.head + len(tail) < self.total:
            start = tail.find(b"\n") + 1  # the tail begins at a line's start, if it has one
            if 0 < start < len(tail):
                tail = tail[start:]
                cut += start
            dropped = self.total - self.head - len(tail)
            marker = (
                f"[ys: {dropped} bytes of output dropped here; the log keeps the first "
                f"{self.head} and the last {len(tail)} bytes (YS_LOG_MAX_BYTES="
                f"{self.limit})]\n"
            ).encode()
            # dated as the first kept line: the times beside the log only grow with it
            self._write(marker if self._ends_line else b"\n" + marker, _came_at(chunks, cut))
        at = 0
        for came, data in chunks:  # each kept part of a chunk with the time it came
            start, at = max(at, cut), at + len(data)
            if at > start:
                self._write(joined[start:at], came)

    def close(self) -> None:
        """Seal the log and close the file."""
        self.seal()
        if self._late:
            note = f"[ys: {self._late} more bytes of output dropped after the outcome]\n"
            if self.size + len(note) <= self.limit:
                self._write(note.encode(), time.time())
            self._late = 0
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._times.close()

    def _write(self, data: bytes, came: float) -> None:
        """Append `data`, which came at `came` (its time kept beside the log)."""
        if not data or self._fd is None:
            return
        self._times.note(self.size, came)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:  # a full disk: the worker goes on, its output is lost
            log.error("cannot write %s: %s; dropping the rest of its output", self.path, exc)
            os.close(self._fd)
            self._fd = None
            return
        self._ends_line = data.endswith(b"\n")
        self.size += len(data)


def _came_at(chunks: list[tuple[float, bytes]], offset: int) -> float:
    """When the byte at `offset` of the chunks joined came (now, past their end)."""
    at = 0
    for came, data in chunks:
        at += len(data)
        if offset < at:
            return came
    return time.time()


class LastLine:
    """The last line of a stream that is not blank (a shell workflow's result), fed in
    chunks; at most 2,000 characters of it."""

    KEEP = 8192  # bytes of an unfinished line kept

    def __init__(self) -> None:
        self.line = ""
        self._partial = b""

    def feed(self, data: bytes) -> None:
        *complete, partial = (self._partial + data).split(b"\n")
        self._partial = partial[-self.KEEP :]
        for raw in reversed(complete):
            if self._take(raw):
                return

    def close(self) -> None:
        self._take(self._partial)
        self._partial = b""

    def _take(self, raw: bytes) -> bool:
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            return False
        self.line = text[-2000:]
        return True


class Pipe:
    """The read end of a worker's output pipe (owned: closed here), copied into `sink` on the
    loop as data arrives."""

    BURST = 16  # reads per wake-up, so that one chatty worker cannot hold up the loop

    def __init__(self, fd: int, sink: Callable[[bytes], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._fd: int | None = fd
        self._sink = sink
        self.closed: asyncio.Future[None] = self._loop.create_future()
        os.set_blocking(fd, False)
        self._loop.add_reader(fd, self._read, self.BURST)

    def _read(self, limit: int) -> None:
        for _ in range(limit):
            if self._fd is None:
                return
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            except OSError as exc:
                log.warning("reading a worker's output failed: %s", exc)
                data = b""
            if not data:  # every writer has closed its end
                self.close()
                return
            self._sink(data)

    def read_now(self) -> None:
        """Copy what the pipe holds now. A worker flushes its output before it reports its
        outcome, so when the report comes, all it printed is here or already copied."""
        self._read(1024)

    def close(self) -> None:
        if self._fd is None:
            return
        self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._fd = None
        if not self.closed.done():
            self.closed.set_result(None)


async def drain(pipes: list[Pipe], timeout: float) -> None:
    """Copy what is left in the pipes until their writers are gone; a process that left the
    delivery's process group may hold a pipe open for ever, so stop waiting after `timeout`."""
    waiting = [p.closed for p in pipes if not p.closed.done()]
    if waiting:
        await asyncio.wait(waiting, timeout=timeout)
    for p in pipes:
        p.read_now()
        p.close()
