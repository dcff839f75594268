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


def _child(req: dict[str, Any], keep: list[int], output: int) -> None:
    """In the forked child: become the worker. Never returns."""
    code = 70
    try:
        os.setsid()
        for fd in keep:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(null)
        os.close(output)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = ["ys.worker"]
        import random

        random.seed()
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


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
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


if __name__ == "__main__":
    sys.exit(main())
