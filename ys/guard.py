"""A delivery ends its own processes once its daemon cannot supervise it any more, so that no
execution ever runs in two places at once:

- the daemon is gone (killed, crashed): the delivery's end of its link to the daemon closes;
- its lease was not renewed before it ends (the daemon is stopped, wedged, or cut off from
  its database): the lease's end is measured on this box's monotonic clock from the start of
  the last renewal the daemon confirmed, a little early (`lease_end`), so the group is gone
  before another claim can take the execution.

Either way the delivery's whole process group (its session: each delivery has its own) is
killed with SIGKILL, which a command that ignores SIGTERM cannot outlive.

A Python worker watches its channel (ys.worker's heartbeat). A shell script has no Python of
its own, so the daemon starts this module beside it, in its group:

    python -I -S ys/guard.py UNTIL     (stdin: the lifeline; UNTIL: the lease's end)

The daemon holds the write end of the lifeline, a pipe, and writes the lease's new end
(`lease_end`, time.monotonic() of the daemon, the same clock) as a line after each renewal;
the pipe's end of file says the daemon is gone. Standard library only, run without `site`:
it starts beside every shell delivery.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import NoReturn

FOREVER = 86400.0 * 365  # a lease's end past this is none (an unlimited lease: inf)
MARGIN = 0.1  # of a lease (at most a second): how much before its end a delivery stops


def margin(lease_seconds: float) -> float:
    """How long before its lease's end a delivery stops itself."""
    return min(1.0, lease_seconds * MARGIN)


def lease_end(since: float, lease_seconds: float) -> float:
    """When a delivery stops itself (time.monotonic()) unless its lease is renewed again, for a
    lease of `lease_seconds` granted no earlier than `since`."""
    return since + lease_seconds - margin(lease_seconds)


def end_group(why: str) -> NoReturn:
    """Say why on stderr (unless the pipe is full: nothing may wait here), then kill this
    process's group, this process with it."""
    line = f"ys: {why}; ending this delivery and everything it started\n".encode()
    # A write to a pipe nobody reads (the daemon is gone) must fail here, not end this
    # process by SIGPIPE (a worker's default) before it ends the rest of its group.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
    try:
        if select.select([], [2], [], 0)[1]:
            os.write(2, line)  # shorter than PIPE_BUF: all of it or nothing
    except OSError:
        pass
    os.killpg(0, signal.SIGKILL)
    os._exit(137)  # not reached: the signal ends this process too


def watch(fd: int, until: Callable[[], float | None], events: int = select.POLLRDHUP) -> bool:
    """Block until `fd` reports `events` (or a hang-up or an error): True; or until the
    lease's end `until()` (None: not watched now) has passed: False."""
    poll = select.poll()
    poll.register(fd, events)
    while True:
        end = until()
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0:
            return False
        wait = None if left is None or left > FOREVER else int(left * 1000) + 1
        if poll.poll(wait):
            return True


LAPSED = "its lease was not renewed in time (is its daemon stopped?)"
GONE = "its daemon is gone"


def main(argv: list[str]) -> int:
    """The shell delivery's guard: read the lease's new ends from stdin until the daemon goes
    away or the lease's end passes, then end the group."""
    until = float(argv[0])
    os.set_blocking(0, False)
    buf = b""

    def end() -> float:
        return until

    while True:
        if not watch(0, end, select.POLLIN):
            end_group(LAPSED)
        try:
            data = os.read(0, 4096)
        except BlockingIOError:
            continue
        if not data:
            end_group(GONE)
        *lines, buf = (buf + data).split(b"\n")
        for line in lines:
            until = max(until, float(line))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
