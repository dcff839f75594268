"""What the store offers for observing and versions, beside the execution client: the
counts metrics read (from the tables schema migration 8's triggers keep, due executions from
the partial index on due_at), the all-executions event stream, the script versions
admissions record and claims run, and a commit observer.

The event stream (`GET /v1/events`, `ys history --follow --all`) reads `event_log`, whose
positions follow commit order (across daemons too: PostgreSQL's writer holds an advisory lock
to commit, schema migration 7), so a cursor resumes after the last event a reader has, with
no gap and no repeat, whichever daemon it asks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ys.contract import check_time
from ys.store.base import LOG_TAIL_BYTES, LogTail, ScriptOptions, SharedCounts
from ys.store.eventdata import stored_event_data
from ys.store.paging import MAX_BATCH, check_cursor
from ys.store.reading import StreamEvent
from ys.store.records import Event
from ys.store.sql import versions
from ys.store.sql.core import Core


def shared_counts(c: Any, now: float) -> SharedCounts:
    """The count tables the triggers keep, and the due executions (c: one snapshot)."""
    executions = {
        (w, s): int(n)
        for w, s, n in c.execute(
            "SELECT workflow, status, n FROM execution_counts WHERE n > 0"
        ).fetchall()
    }
    effects = {
        s: int(n)
        for s, n in c.execute("SELECT status, n FROM effect_counts WHERE n > 0").fetchall()
    }
    due, oldest = c.execute(
        "SELECT COUNT(*), MIN(due_at) FROM executions "
        "WHERE due_at IS NOT NULL AND due_at <= ? AND lease_token IS NULL AND slot_wait IS NULL",
        (now,),
    ).fetchone()
    return SharedCounts(executions, effects, int(due), oldest, versions.count_script_waits(c))


def last_position(c: Any) -> int:
    """The position of the newest event (0: none yet): a cursor that starts at now."""
    row = c.execute("SELECT MAX(pos) FROM event_log").fetchone()
    return int(row[0] or 0)


def position_before(c: Any, since: float) -> int:
    """A cursor just before the first event at or after `since` (asked once per reader)."""
    row = c.execute("SELECT MIN(pos) FROM event_log WHERE at >= ?", (since,)).fetchone()
    return int(row[0]) - 1 if row[0] is not None else last_position(c)


def events_after(c: Any, after: int, limit: int) -> tuple[list[StreamEvent], int]:
    """Up to `limit` events past position `after`, oldest first, and the cursor after them."""
    rows = c.execute(
        "SELECT l.pos, l.execution_id, x.workflow, e.seq, e.at, e.kind, e.data "
        "FROM event_log l JOIN events e ON e.execution_id = l.execution_id AND e.seq = l.seq "
        "JOIN executions x ON x.execution_id = l.execution_id "
        "WHERE l.pos > ? ORDER BY l.pos LIMIT ?",
        (after, max(1, min(limit, MAX_BATCH))),
    ).fetchall()
    items = [
        StreamEvent(
            int(pos),
            eid,
            wf,
            int(seq),
            Event(kind, float(at), stored_event_data(kind, json.loads(data))),
        )
        for pos, eid, wf, seq, at, kind, data in rows
    ]
    return items, (int(rows[-1][0]) if rows else after)


class Observing:
    """The observing client of one store: metrics' counts, the event stream, script
    versions and the commit observer."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def shared_counts(self, now: float | None = None) -> SharedCounts:
        """What every daemon on this database reports alike, from one snapshot."""
        t = self._core.now(now)
        return self._core.snapshot(lambda c: shared_counts(c, t))

    def event_stream(
        self, cursor: str | None = None, *, since: float | None = None, limit: int = 1000
    ) -> tuple[list[StreamEvent], str]:
        """Events of every execution after `cursor`, in commit order, and the cursor after
        them. Without a cursor: from `since` (epoch seconds), else from now (none yet)."""
        if cursor is not None:
            after = check_cursor(cursor)
        elif since is not None:
            at = check_time(since, "since")
            after = self._core.read(lambda c: position_before(c, at))
        else:
            return [], str(self._core.read(last_position))
        items, pos = self._core.read(lambda c: events_after(c, after, limit))
        return items, str(pos)

    def set_script(
        self,
        workflow: str,
        sha256: str,
        *,
        pin: bool = False,
        timeout: float | None = None,
        now: float | None = None,
        options: ScriptOptions | None = None,
    ) -> None:
        """The version of `workflow`'s script the daemon sees now: what admissions record,
        and what unpinned deliveries run; `timeout` counts from each later admission, and
        `options` apply to every daemon's claims and lease sweeps."""
        if timeout is not None:
            from ys.contract import check_time

            check_time(timeout, "timeout")
        t = self._core.now(now)
        self._core.write(
            lambda c: versions.set_script_tx(c, workflow, sha256, pin, t, timeout, options)
        )
        self._core.script_recorded(workflow, sha256)

    def scripts_needed(self) -> set[str]:
        """Versions a live execution needs, and each workflow's current one (ys gc keeps them)."""
        return self._core.snapshot(versions.needed)

    def stale_scripts(self) -> dict[str, int]:
        """Per workflow: live executions admitted under an older version than the current."""
        return self._core.read(versions.stale)

    def observe_commits(self, observer: Callable[[float, int], None] | None) -> None:
        """Call `observer(seconds, requests)` after each commit of the writer (metrics)."""
        self._core.observe_commits(observer)

    def keep_log_tail(
        self,
        execution_id: str,
        attempt: int,
        *,
        daemon_id: str,
        path: str,
        size: int,
        tail: bytes,
        now: float | None = None,
    ) -> None:
        """Keep the end of one delivery's log; the same delivery again replaces it."""
        t = self._core.now(now)
        kept = bytes(tail[-LOG_TAIL_BYTES:])

        def tx(c: Any) -> None:
            c.execute(
                "INSERT INTO delivery_logs (execution_id, attempt, daemon_id, path, size, tail, "
                "ended_at) SELECT ?,?,?,?,?,?,? WHERE EXISTS (SELECT 1 FROM executions "
                "WHERE execution_id=?) ON CONFLICT (execution_id, attempt) DO UPDATE SET "
                "daemon_id=EXCLUDED.daemon_id, path=EXCLUDED.path, size=EXCLUDED.size, "
                "tail=EXCLUDED.tail, ended_at=EXCLUDED.ended_at",
                (execution_id, int(attempt), daemon_id, path, int(size), kept, t, execution_id),
            )

        self._core.write(tx)

    def log_tails(self, execution_id: str, attempt: int | None = None) -> list[LogTail]:
        """The kept log ends of an execution's deliveries (of one `attempt`), in order."""

        def read(c: Any) -> list[LogTail]:
            rows = c.execute(
                "SELECT attempt, daemon_id, path, size, tail, ended_at FROM delivery_logs "
                "WHERE execution_id=?"
                + (" AND attempt=?" if attempt is not None else "")
                + " ORDER BY attempt",
                (execution_id,) if attempt is None else (execution_id, attempt),
            ).fetchall()
            return [LogTail(a, d, p, s, bytes(b), e) for a, d, p, s, b, e in rows]

        return self._core.read(read)
