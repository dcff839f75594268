"""One raw HTTP request to a daemon's socket, for tests that send what no client would: any
bytes as the body, any headers. Standard library only (http.client over AF_UNIX)."""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

from tests.support import DaemonHandle


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def send(
    h: DaemonHandle,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, Any]:
    """The status and the JSON body (None when empty) of one request on a new connection."""
    conn = _UnixHTTP(str(h.socket), timeout)
    try:
        conn.request(
            method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})}
        )
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, json.loads(data) if data else None
    finally:
        conn.close()
