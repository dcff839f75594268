"""Helpers for the dashboard's tests: an HTTP session over the daemon's socket that signs in
the way a browser does (the one-time token for a cookie), and what the pages must never do."""

from __future__ import annotations

import http.client
import re
import socket
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

from tests.support import DaemonHandle


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("ys", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    text: str

    def header(self, name: str) -> str:
        return self.headers.get(name) or ""


@dataclass
class UiSession:
    """Requests to the daemon's /ui/ pages over its socket, with the cookies they set."""

    daemon: DaemonHandle
    cookies: dict[str, str] = field(default_factory=dict)

    def request(
        self,
        method: str,
        path: str,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> Answer:
        conn = _UnixConnection(str(self.daemon.socket), timeout)
        h = {"Host": "127.0.0.1:1", **(headers or {})}
        if self.cookies:
            h["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urlencode(form).encode()
            h["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            text = resp.read().decode("utf-8", "replace")
        finally:
            conn.close()
        for raw in resp.headers.get_all("Set-Cookie") or []:
            jar: SimpleCookie = SimpleCookie()
            jar.load(raw)
            for k, morsel in jar.items():
                self.cookies[k] = morsel.value
        return Answer(resp.status, resp.headers, text)

    def get(self, path: str, **kw: Any) -> Answer:
        return self.request("GET", path, **kw)

    def post(self, path: str, form: dict[str, str], **kw: Any) -> Answer:
        return self.request("POST", path, form=form, **kw)

    def sign_in(self) -> UiSession:
        token = self.daemon.client().ui_token()["token"]
        answer = self.get(f"/ui/?token={token}")
        assert answer.status == 303, answer
        return self

    def csrf(self, path: str = "/ui/") -> str:
        m = re.search(r'name="csrf" value="([^"]+)"', self.get(path).text)
        assert m, f"no CSRF token on {path}"
        return m.group(1)


PAGES = ["/ui/", "/ui/executions", "/ui/schedules", "/ui/effects", "/ui/values", "/ui/workflows"]


def outside_references(html: str) -> list[str]:
    """Every src/href/action that leaves the daemon's origin (absolute or protocol-relative
    URLs), and every inline script or style: the pages must load only their own files."""
    bad = [
        m.group(2)
        for m in re.finditer(r'\b(src|href|action)="([^"]*)"', html)
        if re.match(r"^(?:[a-z][a-z0-9+.-]*:|//)", m.group(2), re.I)
        and not m.group(2).startswith("data:")
    ]  # data: is inline, not from outside
    bad += [m.group(0) for m in re.finditer(r"<script(?![^>]*\bsrc=)[^>]*>", html)]
    bad += [m.group(0) for m in re.finditer(r"<style\b[^>]*>", html)]
    bad += [m.group(0) for m in re.finditer(r'\bstyle="', html)]
    return bad
