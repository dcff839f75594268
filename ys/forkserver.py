"""The warm launcher's other half: a preloaded interpreter that forks one worker per delivery.

    python -m ys.forkserver      (started by the daemon; requests on stdin, replies on stdout)

It imports the worker's modules once, never opens the database (nothing crosses a fork but the
SDK), and is single-threaded, so forking is safe. Each request is one JSON line
`{"id", "env", "cwd", "output"}`; the reply is `{"id", "pid"}` (or `{"id", "error"}`); each
worker's end is reported as `{"exit": pid, "code": status}`. The worker runs in its own session
(its pid is its process group), with stdout and stderr on `output`, a FIFO the daemon reads
into the delivery's log; the server opens it before it forks, so once the reply is sent the
FIFO is open at both ends and the daemon may remove its name.
When stdin closes or stdout breaks (the daemon is gone) the server exits quietly; running
workers are left to the next daemon's recovery.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
from typing import Any

# Preload what every worker needs; this is what makes the launcher warm.
import ys.channel  # noqa: F401 - wsproto and h11 take ~25 ms to import
import ys.client  # noqa: F401
import ys.codec  # noqa: F401
import ys.codecache  # noqa: F401 - and ys.paths (dataclasses, hashlib): ~5 ms
import ys.sdk  # noqa: F401
import ys.worker

_OUT = 1


class DaemonGone(Exception):
    """Nobody reads our replies any more: the daemon was killed."""


def _send(obj: dict[str, Any]) -> None:
    data = (json.dumps(obj) + "\n").encode()
    while data:
        try:
            n = os.write(_OUT, data)
        except BrokenPipeError:
            raise DaemonGone from None
        data = data[n:]


def _prepare(keep: list[int]) -> None:
    """In a forked child, what does not depend on its delivery: its own session, none of the
    server's descriptors, default signals, its own random state."""
    os.setsid()
    for fd in keep:
        os.close(fd)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the server's pipes to the daemon are not the worker's
        os.dup2(null, fd)
    os.close(null)
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    import random

    random.seed()


def _child(
    req: dict[str, Any] | None, keep: list[int], output: int, spare: socket.socket | None = None
) -> None:
    """In the forked child: become the worker (a spare first waits for its delivery on
    `spare`). Never returns."""
    code = 70
    try:
        _prepare(keep)
        if spare is not None:
            got = _await_delivery(spare)
            if got is None:
                os._exit(0)  # the server went away with no delivery for us
            req, output = got
        assert req is not None
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = ["ys.worker"]
        code = ys.worker.main([])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 70
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _await_delivery(sock: socket.socket) -> tuple[dict[str, Any], int] | None:
    """A spare's wait: one JSON line, its output FIFO passed along with its first bytes."""
    data, fds, _, _ = socket.recv_fds(sock, 65536, 1)
    if not data or not fds:
        return None
    while not data.endswith(b"\n"):
        more = sock.recv(65536)
        if not more:
            return None
        data += more
    sock.close()
    return json.loads(data), fds[0]


class Spare:
    """One child forked ahead of its delivery and waiting for it, so that a claim hands work
    to a live process: the fork and the child's first page copies are off the delivery's
    path. `sock` is the server's end of the pair the delivery comes down."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock


_spare: Spare | None = None
_discarded: set[int] = set()  # spares that died before their delivery: no exit to report


def _fork_spare(keep: list[int]) -> None:
    global _spare
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        return  # no spare: the next delivery is forked when it comes
    if pid == 0:
        ours.close()
        _child(None, keep, -1, spare=theirs)
    theirs.close()
    _spare = Spare(pid, ours)


def _hand_over(req: dict[str, Any], output: int) -> int | None:
    """Give the delivery to the spare: its pid, or None if there is none (or it is gone)."""
    global _spare
    spare, _spare = _spare, None
    if spare is None:
        return None
    try:
        socket.send_fds(spare.sock, [json.dumps(req).encode() + b"\n"], [output])
    except OSError:
        _discarded.add(spare.pid)
        return None  # it died; _reap drops its exit, the delivery is forked
    finally:
        spare.sock.close()
    return spare.pid


def _reap() -> None:
    global _spare
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if _spare is not None and pid == _spare.pid:  # a spare that never had work
            _spare.sock.close()
            _spare = None
            continue
        if pid in _discarded:
            _discarded.discard(pid)
            continue
        _send({"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def main() -> int:
    try:
        return _serve()
    except DaemonGone:
        return 0  # a worker's end reported to a daemon that is gone: nothing to say


def _serve() -> int:
    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    os.set_blocking(rfd, False)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon decides when we stop
    buf = b""
    # Everything preloaded goes to the permanent generation: a worker's collections then never
    # walk (and so never copy-on-write) the pages of the objects it shares with this server.
    gc.collect()
    gc.freeze()
    _send({"ready": os.getpid()})
    _fork_spare([rfd, wfd])
    while True:
        try:
            ready, _, _ = select.select([0, rfd], [], [])
        except InterruptedError:
            continue
        if rfd in ready:
            try:
                os.read(rfd, 4096)
            except BlockingIOError:
                pass
            _reap()
        if 0 in ready:
            chunk = os.read(0, 65536)
            if not chunk:
                _reap()
                return 0
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    _fork(json.loads(line), [rfd, wfd])


def _fork(req: dict[str, Any], keep: list[int]) -> None:
    try:
        # Non-blocking, so a FIFO nobody reads is an error (ENXIO), not a hang; the worker
        # writes to it blocking, like to any pipe.
        output = os.open(req["output"], os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        os.set_blocking(output, True)
    except (OSError, KeyError, TypeError) as exc:
        _send({"id": req.get("id"), "error": f"cannot open the output FIFO: {exc}"})
        return
    pid = _hand_over(req, output)
    if pid is None:
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(output)
            _send({"id": req.get("id"), "error": str(exc)})
            return
        if pid == 0:
            _child(req, keep, output)
    os.close(output)
    _send({"id": req.get("id"), "pid": pid})
    _fork_spare(keep)  # the next delivery's, while this one starts


if __name__ == "__main__":
    sys.exit(main())
