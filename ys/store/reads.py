"""Reads of the SQLite store: history pages, lists, describe, verify. No writes here."""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import struct
from typing import Any

from ys.errors import InvalidArgument, NotFound
from ys.store.base import (
    DEFAULT_PAGE,
    MAX_PAGE,
    MAX_TIME,
    MIN_TIME,
    Description,
    Page,
    StepRecord,
)
from ys.store.executions import _FULL, load, row_to_record
from ys.store.records import STATUSES, Event, Record, fold

_STEP_COLUMNS = "key, kind, status, value, attempts, wake_at, updated_at"


def _not_found(execution_id: str) -> NotFound:
    return NotFound("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")


def check_limit(limit: int) -> int:
    if limit == 0:
        return DEFAULT_PAGE
    if not isinstance(limit, int) or limit < 0 or limit > MAX_PAGE:
        raise InvalidArgument("INVALID_ARGUMENT", f"limit must be 1..{MAX_PAGE}, not {limit}")
    return limit


# -- page tokens: opaque to callers ----------------------------------------------------------
# A token is base64url without padding, exactly as made here; anything else, on any paged
# read, is INVALID_ARGUMENT (exit 2), never a number SQLite cannot hold.

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
    return _pack(json.dumps([admitted_at, execution_id], separators=(",", ":")).encode())


def parse_list_token(token: str) -> tuple[float, str]:
    try:
        at, execution_id = json.loads(_unpack(token))
        if (isinstance(at, bool) or not isinstance(at, int | float)
                or not MIN_TIME <= at <= MAX_TIME or not isinstance(execution_id, str)):
            raise ValueError(token)
        return float(at), execution_id
    except (ValueError, TypeError, RecursionError):  # not JSON, not a pair, nested too deep
        raise _malformed(token) from None


# -- reads ----------------------------------------------------------------------------------


def events(c: sqlite3.Connection, execution_id: str, start: int = 1, limit: int = -1) -> list[Event]:
    rows = c.execute(
        "SELECT at, kind, data FROM events WHERE execution_id=? AND seq >= ? ORDER BY seq LIMIT ?",
        (execution_id, start, limit),
    ).fetchall()
    return [Event(kind, at, json.loads(data)) for at, kind, data in rows]


def history(c: sqlite3.Connection, execution_id: str, limit: int, token: str | None) -> Page:
    limit = check_limit(limit)
    start = parse_history_token(token)
    length = c.execute(
        "SELECT history_length FROM executions WHERE execution_id=?", (execution_id,)
    ).fetchone()
    if length is None:
        raise _not_found(execution_id)
    # A token past the end (it may name any 64-bit number, more than SQLite's INTEGER
    # holds) is an empty last page, read without asking SQLite.
    evs = events(c, execution_id, start, limit) if start <= length[0] else []
    items = [
        {"seq": start + i, "at": e.at, "kind": e.kind, "data": e.data} for i, e in enumerate(evs)
    ]
    nxt = start + len(evs)
    return Page(items, history_token(nxt) if nxt <= length[0] else None)


def list_executions(
    c: sqlite3.Connection, *, statuses: list[str] | None, workflow: str | None,
    parent: str | None, limit: int, page_token: str | None,
) -> Page:
    limit = check_limit(limit)
    where: list[str] = []
    args: list[object] = []
    if statuses:
        bad = [s for s in statuses if s not in STATUSES]
        if bad:
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"unknown status {bad[0]!r}; use one of {', '.join(STATUSES)}"
            )
        where.append(f"status IN ({','.join('?' * len(statuses))})")
        args.extend(statuses)
    if workflow:
        where.append("workflow = ?")
        args.append(workflow)
    if parent:
        where.append("parent_id = ?")
        args.append(parent)
    if page_token:
        at, last_id = parse_list_token(page_token)
        where.append("(admitted_at < ? OR (admitted_at = ? AND execution_id > ?))")
        args.extend([at, at, last_id])
    sql = f"SELECT {_FULL} FROM executions"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY admitted_at DESC, execution_id ASC LIMIT ?"
    rows = c.execute(sql, (*args, limit + 1)).fetchall()
    records = [row_to_record(r) for r in rows[:limit]]
    nxt = None
    if len(rows) > limit:
        last = records[-1]
        nxt = list_token(last.admitted_at, last.execution_id)
    return Page(records, nxt)


def steps(c: sqlite3.Connection, execution_id: str) -> list[StepRecord]:
    rows = c.execute(
        f"SELECT {_STEP_COLUMNS} FROM steps WHERE execution_id=? ORDER BY first_seq",
        (execution_id,),
    ).fetchall()
    return [StepRecord(*r) for r in rows]


def deliveries(evs: list[Event]) -> list[dict[str, Any]]:
    """Each claim with when it ended and how, derived from the history."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for e in evs:
        if e.kind == "claimed":
            current = {
                "attempt": e.data.get("attempt"), "started_at": e.at,
                "ended_at": None, "outcome": None,
                "script_sha256": e.data.get("script_sha256"),
            }
            out.append(current)
        elif current is not None and e.kind in (
            "released", "suspended", "completed", "failed", "cancelled"
        ):
            current["ended_at"] = e.at
            current["outcome"] = (
                f"retry ({e.data.get('reason')})" if e.kind == "released" else e.kind
            )
            if e.kind == "released" and e.data.get("detail"):
                current["detail"] = e.data["detail"]
            current = None
    return out


def failed_attempts(evs: list[Event]) -> dict[str, list[dict[str, Any]]]:
    """Each step's failed attempts, oldest first, from the history's step events that carry
    an error: {"attempt", "at", "error"}, by step key."""
    out: dict[str, list[dict[str, Any]]] = {}
    for e in evs:
        if e.kind == "step" and isinstance(e.data.get("error"), dict):
            out.setdefault(e.data["key"], []).append(
                {"attempt": e.data.get("attempts", 1), "at": e.at, "error": e.data["error"]})
    return out


def describe(c: sqlite3.Connection, execution_id: str) -> Description:
    c.execute("BEGIN")
    try:
        record = load(c, execution_id)
        if record is None:
            raise _not_found(execution_id)
        hb, lease = c.execute(
            "SELECT history_bytes, lease_expires_at FROM executions WHERE execution_id=?",
            (execution_id,),
        ).fetchone()
        children = [
            row_to_record(r)
            for r in c.execute(
                f"SELECT {_FULL} FROM executions WHERE parent_id=? ORDER BY admitted_at, execution_id",
                (execution_id,),
            ).fetchall()
        ]
        evs = events(c, execution_id)
        return Description(
            record=record,
            history_bytes=hb,
            steps=steps(c, execution_id),
            deliveries=deliveries(evs),
            children=children,
            lease_expires_at=lease,
            failed_attempts=failed_attempts(evs),
        )
    finally:
        c.execute("COMMIT")


def verify(c: sqlite3.Connection) -> list[str]:
    """Re-fold every history and compare it with the stored record; returns the mismatches."""
    problems = []
    ids = [r[0] for r in c.execute("SELECT execution_id FROM executions ORDER BY execution_id")]
    for execution_id in ids:
        stored = load(c, execution_id)
        evs = events(c, execution_id)
        try:
            folded: Record | None = fold(evs)
        except (ValueError, KeyError) as exc:
            problems.append(f"{execution_id}: history does not fold: {exc}")
            continue
        if folded != stored:
            problems.append(f"{execution_id}: stored record differs from its folded history")
        seqs = [r[0] for r in c.execute(
            "SELECT seq FROM events WHERE execution_id=? ORDER BY seq", (execution_id,)
        )]
        if seqs != list(range(1, len(seqs) + 1)):
            problems.append(f"{execution_id}: event numbers have gaps")
    return problems


def next_due_at(c: sqlite3.Connection) -> float | None:
    row = c.execute(
        "SELECT MIN(t) FROM (SELECT MIN(due_at) AS t FROM executions WHERE due_at IS NOT NULL "
        "AND lease_token IS NULL UNION ALL SELECT MIN(lease_expires_at) FROM executions "
        "WHERE lease_token IS NOT NULL)"
    ).fetchone()
    return row[0] if row else None
