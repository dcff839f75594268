"""The daemon's ID: which daemon holds a lease, when many share one PostgreSQL database.

It is made once per home (the host name and a random suffix, so that two homes on one box,
or two boxes with one host name, differ) and kept in `<data>/daemon-id`, so a restarted
daemon is the same daemon: recovery at start releases exactly the leases it held before.
Edit the file to choose another ID (printable text without spaces, at most 128 characters).
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

from ys.errors import InvalidArgument
from ys.paths import Paths

MAX_ID = 128


def id_file(paths: Paths) -> Path:
    return paths.data / "daemon-id"


def new_id() -> str:
    host = socket.gethostname().split(".")[0] or "ys"
    host = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in host)[:100]
    return f"{host}-{secrets.token_hex(3)}"


def daemon_id(paths: Paths) -> str:
    """The home's daemon ID, made and stored on first use. Called by the daemon once it holds
    the home's lock, so no two callers make one at once."""
    path = id_file(paths)
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        text = ""
    if text:
        if len(text) > MAX_ID or not text.isprintable() or any(ch.isspace() for ch in text):
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                f"{path} holds {text[:40]!r}, not a daemon ID (printable text without "
                f"spaces, at most {MAX_ID} characters); fix it, or remove it to make a new one",
            )
        return text
    made = new_id()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(made + "\n", encoding="utf-8")
    os.replace(tmp, path)  # all or nothing: a crash never leaves half an ID
    return made
