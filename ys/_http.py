"""One HTTP/1.1 keep-alive connection over a Unix socket, for ys.Client's Transport.

http.client costs about 15 ms of a `ys get ID --json` (it imports email, to parse headers,
and ssl); this one writes its request (a request line and four headers, all of them ys's own)
and reads the answer with httptools (llhttp, the parser of Node.js), which imports in ~3 ms.
Only what the daemon's API needs: a JSON body each way, keep-alive, the answer read whole.
"""

from __future__ import annotations

import select
import socket

from httptools import HttpParserError, HttpResponseParser


class NoAnswer(ConnectionResetError):
    """The connection ended before a whole answer came (the daemon closed it or went away)."""


class Response:
    """A whole answer. (Not a dataclass: importing dataclasses costs ~5 ms of a CLI call.)"""

    __slots__ = ("status", "body", "keep_alive")

    def __init__(self, status: int, body: bytes, keep_alive: bool) -> None:
        self.status = status
        self.body = body
        self.keep_alive = keep_alive


class _Reader:
    """httptools' callbacks: the body's pieces, and whether the message is complete."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.done = False
        self.keep_alive = False
        self.parser: HttpResponseParser | None = None

    def on_headers_complete(self) -> None:
        # asked here: once the message is complete, llhttp has reset for the next one
        assert self.parser is not None
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        self.done = True


class UnixHttp:
    """A connection to the daemon's socket, made at the first request."""

    def __init__(self, path: str, timeout: float | None) -> None:
        self.path = path
        self.timeout = timeout
        self.sock: socket.socket | None = None

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock

    def dropped(self) -> bool:
        """Whether the daemon closed this idle connection (it closes idle ones after a while):
        readable with nothing asked means end of stream. Checked before each reuse, so a
        request that is not safe to resend (a POST) is never sent on a dead connection."""
        if self.sock is None:
            return False
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> Response:
        """Send one request and read its whole answer."""
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        lines = [f"{method} {target} HTTP/1.1", "Host: localhost"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value:  # what http.client refuses too
                raise ValueError(f"the {name} header holds a line break")
            lines.append(f"{name}: {value}")
        if body is not None or method in ("POST", "PUT"):
            lines.append(f"Content-Length: {len(body or b'')}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")
        self.sock.sendall(head + body if body else head)
        reader = _Reader()
        parser = reader.parser = HttpResponseParser(reader)
        while not reader.done:
            data = self.sock.recv(65536)
            if not data:
                raise NoAnswer("the daemon closed the connection without an answer")
            try:
                parser.feed_data(data)
            except HttpParserError as exc:
                raise NoAnswer(f"the answer is not HTTP/1.1 ({exc})") from exc
        return Response(parser.get_status_code(), b"".join(reader.parts), reader.keep_alive)
