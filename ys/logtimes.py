"""When each line of a delivery log was printed: the side file `<N>.times` beside `<N>.log`.

The log itself stays exactly the bytes the script printed (what `ys logs` prints, what a
shared database keeps the end of); its times live beside it, one text line per entry,
`<byte offset> <epoch seconds>`: the log's bytes from that offset on reached the daemon at
that time, until the next entry. The daemon (ys.daemon.capture) writes an entry when it
writes bytes at least STEP seconds after the last entry, so a line's time is the time of its
first byte, up to STEP early; offsets and times only grow. A log written before ys kept times
has no side file: `ys logs --since` then counts it as written at its last change (mtime).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable
from pathlib import Path

SUFFIX = ".times"
STEP = 1.0  # seconds: at most one entry this often (see the module docstring)


def times_path(log: Path) -> Path:
    return log.with_suffix(SUFFIX)


class TimesWriter:
    """Appends entries to a log's side file; a write that fails (a full disk) ends the
    entries, never the delivery."""

    def __init__(self, log: Path) -> None:
        self._fd: int | None = os.open(
            times_path(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600
        )
        self._last = float("-inf")

    def note(self, offset: int, at: float) -> None:
        """Bytes written from `offset` on came at `at`."""
        if self._fd is None or at - self._last < STEP:
            return
        self._last = at
        try:
            os.write(self._fd, f"{offset} {at:.3f}\n".encode())
        except OSError:
            self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def read(log: Path) -> list[tuple[int, float]] | None:
    """The entries of `log`'s side file in offset order, or None when it has none."""
    try:
        text = times_path(log).read_text(errors="replace")
    except FileNotFoundError:
        return None
    out: list[tuple[int, float]] = []
    for line in text.split("\n")[:-1]:  # the part after the last newline is a torn entry
        parts = line.split()
        try:
            offset, at = int(parts[0]), float(parts[1])
        except (IndexError, ValueError):
            continue
        # An entry torn by a kill and continued by the next daemon's: left out by length,
        # and anything out of order is too (offsets and times only grow).
        if len(parts) == 2 and (not out or (offset >= out[-1][0] and at >= out[-1][1])):
            out.append((offset, at))
    return out


def line_starts(data: bytes) -> list[int]:
    """The offset of each line's first byte (a last line without a newline counts)."""
    starts = [0] if data else []
    at = data.find(b"\n")
    while at != -1 and at + 1 < len(data):
        starts.append(at + 1)
        at = data.find(b"\n", at + 1)
    return starts


def since_start(
    data: bytes, times: list[tuple[int, float]] | None, cutoff: float, mtime: float | None
) -> int:
    """The offset of the first line printed at or after `cutoff` (len(data): none was). A log
    without times counts as printed at `mtime`; without that either, it is kept whole."""
    if times is None:
        return 0 if mtime is None or mtime >= cutoff else len(data)
    offsets = [o for o, _ in times]
    for start in line_starts(data):
        i = bisect.bisect_right(offsets, start) - 1
        if i >= 0 and times[i][1] >= cutoff:
            return start
    return len(data)


def tail_starts(pieces: Iterable[bytes], lines: int) -> list[int]:
    """For logs printed one after the other, the offset in each from which the last `lines`
    lines of them all begin (len(piece): none of its lines is among them)."""
    chunks = list(pieces)
    out = [len(c) for c in chunks]
    left = lines
    for i in range(len(chunks) - 1, -1, -1):
        if left <= 0:
            break
        starts = line_starts(chunks[i])
        take = min(left, len(starts))
        if take:
            out[i] = starts[-take]
        left -= take
    return out
