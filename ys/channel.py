"""The worker channel: one WebSocket over the daemon's Unix socket for a delivery's steps.

A step save over HTTP costs a request head, its parse and routing on both sides; over the
channel it is one small text frame each way, JSON in both: `{"op": "step", ...}` answered by
`{"ok": ...}` or `{"error": {"code", "message"}}`. HTTP stays the API for users and curl; the
channel is the daemon's route `GET /v1/executions/{id}/channel` (docs/API.md), and the
WebSocket protocol is wsproto's (python-hyper), on a blocking socket: no thread, no event
loop in the worker. Each request is answered before the next is sent, and the daemon answers
a save only once it is committed, so a step returns to the workflow only once it is durable.
"""

from __future__ import annotations

import json
import socket
from collections import deque
from typing import Any

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Event,
    Message,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

from ys.errors import from_code


class ChannelClosed(ConnectionError):
    """The daemon closed the channel or went away: the request may or may not have been
    carried out (as with an HTTP request that got no answer)."""


class Channel:
    """A delivery's WebSocket to the daemon; `call` sends one request and waits its answer."""

    def __init__(self, socket_path: str, target: str, token: str, timeout: float) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._events: deque[Event] = deque()
        try:
            self._sock.connect(socket_path)
            self._send(
                Request(
                    host="localhost", target=target, extra_headers=[(b"x-ys-token", token.encode())]
                )
            )
            self._handshake()
        except BaseException:
            self._sock.close()
            raise

    def _send(self, event: Event) -> None:
        self._sock.sendall(self._ws.send(event))

    def _next(self) -> Event:
        while not self._events:
            data = self._sock.recv(65536)
            if not data:
                raise ChannelClosed("the daemon closed the worker channel")
            self._ws.receive_data(data)
            self._events.extend(self._ws.events())
        return self._events.popleft()

    def _handshake(self) -> None:
        event = self._next()
        if isinstance(event, AcceptConnection):
            return
        if isinstance(event, RejectConnection):  # the daemon's JSON error, as over HTTP
            body = b""
            while event.has_body:
                more = self._next()
                if not isinstance(more, RejectData):
                    break
                body += more.data
                if more.body_finished:
                    break
            try:
                err = json.loads(body)
            except ValueError:
                err = {}
            raise from_code(
                str(err.get("code") or "INTERNAL"),
                str(err.get("message") or f"the worker channel was refused ({event.status_code})"),
            )
        raise ChannelClosed(f"unexpected answer to the worker channel's opening: {event!r}")

    def call(self, request: dict[str, Any]) -> Any:
        """Send one request; its answer's "ok" value, or the error of its code raised."""
        self._send(Message(data=json.dumps(request, separators=(",", ":"), ensure_ascii=False)))
        parts: list[str] = []
        while True:
            event = self._next()
            if isinstance(event, TextMessage):
                parts.append(event.data)
                if event.message_finished:
                    break
            elif isinstance(event, Ping):
                self._send(event.response())
            elif isinstance(event, CloseConnection):
                raise ChannelClosed("the daemon closed the worker channel")
        answer = json.loads("".join(parts))
        if "error" in answer:
            err = answer["error"]
            raise from_code(str(err.get("code")), str(err.get("message")))
        return answer.get("ok")

    def close(self) -> None:
        try:
            self._send(CloseConnection(code=1000))
        except Exception:  # noqa: BLE001 - closing a channel whose daemon is gone
            pass
        self._sock.close()
