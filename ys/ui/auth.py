"""Who may see the dashboard: one-time tokens, session cookies and CSRF tokens.

`ys ui` asks the daemon (over its private socket) for a one-time token and prints a URL that
carries it. The first request with it gets a session cookie (HttpOnly, SameSite=Strict, only
for /ui/); every other request without a valid cookie is refused, so another user of the
machine, who can reach the TCP port but not the socket, or a web page in the browser, which
cannot read the cookie or send it cross-site, gets nothing. A mutating POST must also carry
the CSRF token derived from the session.

Sessions and CSRF tokens are HMACs under a key kept in the daemon's runtime folder (0700,
the file 0600), so they survive a daemon restart; tokens live in memory and are spent once.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path

TOKEN_SECONDS = 15 * 60  # an unspent token from `ys ui` lasts this long
SESSION_SECONDS = 7 * 86400


def _key(folder: Path) -> bytes:
    """The dashboard's key: 32 random bytes in `<runtime>/ui.key`, made once, mode 0600."""
    path = folder / "ui.key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        data = path.read_bytes()
        if len(data) >= 32:
            return data
        path.unlink()  # a half-written key from a crash: make a new one
        return _key(folder)
    key = secrets.token_bytes(32)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


class Gate:
    """Mints and spends one-time tokens; checks session cookies and CSRF tokens."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._tokens: dict[str, float] = {}  # token -> expiry
        # Cookies are per host, not per port: a daemon of another home on the same machine
        # must not overwrite this one's cookie, so the name carries the key's fingerprint.
        self.cookie = "ys_" + self._mac("cookie-name")[:10]

    @classmethod
    def in_folder(cls, folder: Path) -> Gate:
        return cls(_key(folder))

    def _mac(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()

    def mint(self, now: float | None = None) -> tuple[str, float]:
        t = time.time() if now is None else now
        self._tokens = {k: v for k, v in self._tokens.items() if v > t}
        token = secrets.token_urlsafe(24)
        self._tokens[token] = t + TOKEN_SECONDS
        return token, t + TOKEN_SECONDS

    def spend(self, token: str, now: float | None = None) -> str | None:
        """A new session's cookie value for an unspent token, else None. Spent either way."""
        t = time.time() if now is None else now
        expires = self._tokens.pop(token, None)
        if expires is None or expires < t:
            return None
        until = int(t + SESSION_SECONDS)
        body = f"{until}.{secrets.token_urlsafe(12)}"
        return f"{body}.{self._mac('session.' + body)}"

    def session_ok(self, cookie: str | None, now: float | None = None) -> bool:
        if not cookie or cookie.count(".") != 2:
            return False
        body, _, mac = cookie.rpartition(".")
        if not hmac.compare_digest(mac, self._mac("session." + body)):
            return False
        until = body.split(".", 1)[0]
        return until.isdigit() and int(until) > (time.time() if now is None else now)

    def csrf(self, cookie: str) -> str:
        return self._mac("csrf." + cookie)[:32]

    def csrf_ok(self, cookie: str, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf(cookie), token or "")
