"""The warm launcher's other half: a preloaded interpreter that forks the workers ahead.

    python -m ys.worker.forkserver FD      (started by the daemon; FD is its end of their link)

It imports the worker's modules once, never opens the database (nothing crosses a fork but the
SDK), and is single-threaded, so forking is safe. It keeps the daemon supplied with *spares*:
children forked ahead of any delivery, each waiting on its own socket pair. The server hands
the daemon the other end of each (`{"spare": pid}` on the link, the socket passed with it),
so a delivery goes from the daemon straight to a live process: the daemon writes the launch
(ys/worker/channel.py) with the delivery's output pipe passed along, and the same socket is then the
worker's channel. The fork server is on no delivery's path.

On the link (a Unix stream socket), one JSON line per message. From the daemon: `{"spares":
n}`, fork n more. To the daemon: `{"ready": pid}` once, `{"spare": pid}` with its socket,
and `{"exit": pid, "code": status}` when a child ends (the server is every worker's parent).
A spare that the daemon closes without a delivery exits quietly. When the link closes (the
daemon is gone) the server exits; running workers end themselves, each seeing its own
channel close (ys.guard).
"""

from __future__ import annotations

import gc
import json
import os
import random
import select
import signal
import socket
import sys
from typing import Any

import ys.codec  # noqa: F401
import ys.guard  # noqa: F401
import ys.sdk  # noqa: F401

# Preload what every worker needs; this is what makes the launcher warm.
import ys.worker.channel  # noqa: F401
import ys.worker.codecache  # noqa: F401 - and ys.paths (dataclasses, hashlib): ~5 ms
import ys.worker.delivery
from ys import runenv
from ys.paths import WORKFLOW_UMASK
from ys.worker.wire import ServerMessage, WarmLaunch

WARM_UP_AFTER = 0.02  # seconds a spare waits for a delivery before it warms up (ys.worker.delivery)
# The delivery's own names come with each launch; none may linger from the server's start.
DELIVERY_ENV = ("YS_EXECUTION_ID", "YS_DELIVERY_TOKEN", "YS_WORKFLOW_FILE", "YS_ATTEMPT")


class DaemonGone(Exception):
    """Nobody reads our messages any more: the daemon was killed."""


def _send(link: socket.socket, obj: ServerMessage, fd: int | None = None) -> None:
    data = (json.dumps(obj) + "\n").encode()
    try:
        if fd is not None:
            sent = socket.send_fds(link, [data], [fd])
            data = data[sent:]
        if data:
            link.sendall(data)
    except OSError:
        raise DaemonGone from None


def _prepare(keep: list[int]) -> None:
    """In a forked child, what does not depend on its delivery: its own session, none of the
    server's descriptors, default signals, its own random state."""
    os.setsid()
    for fd in keep:
        os.close(fd)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the server's link to the daemon is not the worker's
        os.dup2(null, fd)
    os.close(null)
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    random.seed()


def _spare(sock: socket.socket, keep: list[int]) -> None:
    """In the forked child: wait for a delivery on `sock`, then be its worker. Never
    returns."""
    code = 70
    try:
        _prepare(keep)
        heartbeat = None
        # Warm up once idle for a moment: a spare forked while a delivery starts would
        # otherwise take the CPU from it; one that gets its delivery at once goes cold.
        if not select.select([sock], [], [], WARM_UP_AFTER)[0]:
            heartbeat = ys.worker.delivery.warm_up()
        launch = _await_delivery(sock)
        if launch is None:
            os._exit(0)  # the daemon let us go with no delivery
        channel, start, output = launch
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        os.chdir(start["cwd"])
        os.umask(start.get("umask", WORKFLOW_UMASK))  # the server has the daemon's private one
        os.environ.update(start["env"])
        runenv.apply_limits(start.get("nice"), start.get("memory_max"), start.get("cgroup"))
        sys.argv = ["ys.worker"]
        code = ys.worker.delivery.deliver(channel, start, heartbeat)
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


def _await_delivery(sock: socket.socket) -> tuple[Any, WarmLaunch, int] | None:
    """A spare's wait: the launch's first bytes come with the delivery's output pipe."""
    try:
        data, fds, _, _ = socket.recv_fds(sock, 262144, 1)
    except OSError:
        return None
    if not data or not fds:
        for fd in fds:
            os.close(fd)
        return None
    from ys.worker.channel import Channel

    channel = Channel(sock, data)
    return channel, json.loads(channel.read_line()), fds[0]


class Server:
    def __init__(self, link: socket.socket, wakeup: tuple[int, int]) -> None:
        self.link = link
        self.wakeup = wakeup

    def keep(self) -> list[int]:
        """What a child closes: the server's descriptors."""
        return [self.link.fileno(), *self.wakeup]

    def fork_spare(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            _send(self.link, {"spare": None, "error": "fork failed"})
            return
        if pid == 0:
            ours.close()
            _spare(theirs, self.keep())
        theirs.close()
        try:
            _send(self.link, {"spare": pid}, ours.fileno())
        finally:
            ours.close()

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            _send(self.link, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})

    def serve(self) -> int:
        buf = b""
        rfd, link = self.wakeup[0], self.link.fileno()
        while True:
            try:
                ready, _, _ = select.select([link, rfd], [], [])
            except InterruptedError:
                continue
            if rfd in ready:
                try:
                    os.read(rfd, 4096)
                except BlockingIOError:
                    pass
                self.reap()
            if link in ready:
                try:
                    chunk = self.link.recv(65536)
                except OSError:  # the daemon was killed
                    chunk = b""
                if not chunk:
                    self.reap()
                    return 0
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        for _ in range(max(0, int(json.loads(line).get("spares", 0)))):
                            self.fork_spare()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    link = socket.socket(fileno=int(args[0]))
    link.setblocking(True)
    os.set_inheritable(link.fileno(), False)
    for name in DELIVERY_ENV:
        os.environ.pop(name, None)
    ys.worker.codecache.pin_folder()
    ys.worker.delivery.prepare_warm_up()
    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    os.set_blocking(rfd, False)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon decides when we stop
    # Everything preloaded goes to the permanent generation: a worker's collections then never
    # walk (and so never copy-on-write) the pages of the objects it shares with this server.
    gc.collect()
    gc.freeze()
    server = Server(link, (rfd, wfd))
    try:
        _send(link, {"ready": os.getpid()})
        return server.serve()
    except DaemonGone:
        return 0  # a message to a daemon that is gone: nothing to say


if __name__ == "__main__":
    sys.exit(main())
