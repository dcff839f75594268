"""The worker channel: one delivery's line of talk with the daemon, newline-delimited JSON
over a Unix socket the daemon hands the worker at its launch (a socket pair: nothing to
connect, no HTTP, no token in each request).

The daemon writes the launch first: one line with the delivery (execution, token, script)
and its run state (params, context, the steps recorded so far). Then the worker asks and the
daemon answers, a line each way: `{"id": n, "op": "step", ...}` answered `{"id": n, "ok":
...}` or `{"id": n, "error": {"code", "message"}}`. The daemon answers a step's save only
once it is committed, so a step returns to the workflow only once it is durable. Answers come
in the order of their requests.

A request sent with `send` is pipelined: the worker goes on without its answer (a step's
deadline is announced so), and an error in it is raised by the next `call`. The channel is
shared by the workflow's thread and the heartbeat's, one request and its answer at a time.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

from ys.errors import YsError, from_code

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class ChannelClosed(ConnectionError):
    """The daemon closed the channel or went away: the request may or may not have been
    carried out."""


class Channel:
    """A delivery's end of its channel (a connected, blocking stream socket)."""

    def __init__(self, sock: socket.socket, buffered: bytes = b"") -> None:
        self._sock = sock
        self._buf = buffered
        self._lock = threading.Lock()
        self._next = 0
        self._unread: set[int] = set()  # pipelined requests whose answers are not read yet
        self._deferred: YsError | None = None  # the first error a pipelined request got

    def fileno(self) -> int:
        """The socket's descriptor (watched for the daemon's end closing: ys.worker)."""
        return self._sock.fileno()

    def read_line(self) -> bytes:
        """The next line the daemon wrote (without its newline)."""
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                line, self._buf = self._buf[:i], self._buf[i + 1 :]
                return line
            data = self._sock.recv(262144)
            if not data:
                raise ChannelClosed("the daemon closed the worker channel")
            self._buf += data

    def _write(self, request: dict[str, Any]) -> int:
        self._next += 1
        request["id"] = self._next
        self._sock.sendall(_dumps(request).encode() + b"\n")
        return self._next

    def send(self, request: dict[str, Any]) -> None:
        """Send a request without waiting for its answer (see the module)."""
        with self._lock:
            self._unread.add(self._write(request))

    def call(self, request: dict[str, Any]) -> Any:
        """Send one request; its answer's "ok" value, or the error of its code raised."""
        with self._lock:
            rid = self._write(request)
            while True:
                answer = json.loads(self.read_line())
                got = answer.get("id")
                if got == rid:
                    break
                self._unread.discard(got)
                if "error" in answer and self._deferred is None:
                    self._deferred = _error(answer["error"])
            deferred, self._deferred = self._deferred, None
        if deferred is not None:
            raise deferred
        if "error" in answer:
            raise _error(answer["error"])
        return answer.get("ok")

    def finish(self) -> None:
        """Read the answers of the pipelined requests; the first error among them raised."""
        with self._lock:
            while self._unread:
                answer = json.loads(self.read_line())
                self._unread.discard(answer.get("id"))
                if "error" in answer and self._deferred is None:
                    self._deferred = _error(answer["error"])
            deferred, self._deferred = self._deferred, None
        if deferred is not None:
            raise deferred


def _error(err: Any) -> YsError:
    if not isinstance(err, dict):
        err = {}
    return from_code(str(err.get("code") or "INTERNAL"), str(err.get("message") or "no message"))
