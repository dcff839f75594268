"""Paging, the same for every adapter: page sizes, and the page tokens of histories and
lists. Tokens are opaque to callers, but every adapter makes and reads them alike, so a token
one daemon gave stays good on another daemon of the same database."""

from __future__ import annotations

import base64
import json
import re
import struct
from typing import Any

from ys.durations import MAX_TIME, MIN_TIME
from ys.errors import InvalidArgument
from ys.store.base import DEFAULT_PAGE, MAX_PAGE


def check_limit(limit: int) -> int:
    """A page size: 1..MAX_PAGE, 0 for the default."""
    if limit == 0:
        return DEFAULT_PAGE
    if not isinstance(limit, int) or limit < 0 or limit > MAX_PAGE:
        raise InvalidArgument("INVALID_ARGUMENT", f"limit must be 1..{MAX_PAGE}, not {limit}")
    return limit


# -- page tokens ------------------------------------------------------------------------------
# A token is base64url without padding, exactly as made here; anything else, on any paged
# read, is INVALID_ARGUMENT (exit 2), never a number a database cannot hold.

_TOKEN_TEXT = re.compile(r"[A-Za-z0-9_-]{1,4096}")


def _pack(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unpack(token: str) -> bytes:
    """The bytes of a token made by `_pack`; ValueError for any other text (b64decode alone
    would skip characters outside the alphabet and read the rest)."""
    if not isinstance(token, str) or not _TOKEN_TEXT.fullmatch(token):
        raise ValueError(token)
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    if _pack(raw) != token:
        raise ValueError(token)
    return raw


def _malformed(token: str) -> InvalidArgument:
    return InvalidArgument(
        "INVALID_ARGUMENT",
        f"malformed page token {token[:80]!r}: pass back a next_page_token as it was given",
    )


def history_token(seq: int) -> str:
    """The token for the page that starts at event `seq` (8 big-endian bytes, base64url)."""
    return _pack(struct.pack(">Q", seq))


def parse_history_token(token: str | None) -> int:
    """The empty token is event 1; anything malformed, or event 0, is INVALID_ARGUMENT."""
    if not token:
        return 1
    try:
        raw = _unpack(token)
        if len(raw) != 8:
            raise ValueError(token)
        (seq,) = struct.unpack(">Q", raw)
    except (ValueError, struct.error):  # binascii.Error is a ValueError
        raise _malformed(token) from None
    if seq < 1:
        raise InvalidArgument("INVALID_ARGUMENT", "page token names event 0; events start at 1")
    return int(seq)


def list_token(admitted_at: float, execution_id: str) -> str:
    """The token for the list page after the record (admitted_at, execution_id)."""
    return _pack(json.dumps([admitted_at, execution_id], separators=(",", ":")).encode())


def parse_list_token(token: str) -> tuple[float, str]:
    """(admitted_at, execution_id) of a list token; anything malformed is INVALID_ARGUMENT."""
    try:
        at, execution_id = json.loads(_unpack(token))
        if (
            isinstance(at, bool)
            or not isinstance(at, int | float)
            or not MIN_TIME <= at <= MAX_TIME
            or not isinstance(execution_id, str)
            or "\x00" in execution_id
        ):
            raise ValueError(token)
        execution_id.encode("utf-8")  # a lone surrogate names no execution: malformed
        return float(at), execution_id
    except (ValueError, TypeError, RecursionError):  # not JSON, not a pair, nested too deep
        raise _malformed(token) from None  # (UnicodeEncodeError is a ValueError)


# -- event stream cursors ----------------------------------------------------------------------
# A cursor is the position of the last event a reader has in the all-executions event log.

MAX_BATCH = 1000


def check_cursor(cursor: Any) -> int:
    """A cursor is the text of a position: a whole number >= 0."""
    try:
        pos = int(cursor)
        if pos < 0 or str(pos) != str(cursor).strip():
            raise ValueError(cursor)
    except (TypeError, ValueError):
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"cursor must be a cursor ys gave (a whole number), not {cursor!r}"
        ) from None
    return pos
