"""Every event of every execution, in commit order (`GET /v1/events`, `ys history --follow
--all`). Schema migration 9 gives each event a position in `event_log` in the event's own
transaction; a cursor is the position of the last event a reader has, so it resumes after
it, without gaps or repeats, whatever happened to the daemon meanwhile."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ys.store.paging import MAX_BATCH, check_cursor  # noqa: F401 - the stream's cursor


def last_position(c: sqlite3.Connection) -> int:
    """The position of the newest event (0: none yet): a cursor that starts at now."""
    row = c.execute("SELECT MAX(pos) FROM event_log").fetchone()
    return int(row[0] or 0)


def position_before(c: sqlite3.Connection, since: float) -> int:
    """A cursor just before the first event at or after `since` (a scan of the log: it is
    asked once, when a reader starts)."""
    row = c.execute("SELECT MIN(pos) FROM event_log WHERE at >= ?", (since,)).fetchone()
    return int(row[0]) - 1 if row[0] is not None else last_position(c)


def events_after(
    c: sqlite3.Connection, after: int, limit: int = MAX_BATCH
) -> tuple[list[dict[str, Any]], int]:
    """Up to `limit` events past position `after`, oldest first, and the cursor after them."""
    rows = c.execute(
        "SELECT l.pos, l.execution_id, x.workflow, e.seq, e.at, e.kind, e.data "
        "FROM event_log l JOIN events e ON e.execution_id = l.execution_id AND e.seq = l.seq "
        "JOIN executions x ON x.execution_id = l.execution_id "
        "WHERE l.pos > ? ORDER BY l.pos LIMIT ?",
        (after, max(1, min(limit, MAX_BATCH))),
    ).fetchall()
    items = [
        {
            "pos": pos,
            "execution_id": eid,
            "workflow": wf,
            "seq": seq,
            "at": at,
            "kind": kind,
            "data": json.loads(data),
        }
        for pos, eid, wf, seq, at, kind, data in rows
    ]
    return items, (rows[-1][0] if rows else after)
