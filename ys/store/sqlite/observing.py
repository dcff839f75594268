"""What the store offers for observing and versions, beside the execution client: the
counts metrics read, the all-executions event stream, the script versions admissions record
and claims run, and a commit observer. The SQL is in metrics.py, stream.py and
versions.py beside this module."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ys.contract import check_time
from ys.store.base import LOG_TAIL_BYTES, LogTail, SharedCounts
from ys.store.sqlite.core import Core


class SqliteObserving:
    """The observing client of one SqliteStore: metrics' counts, the event stream, script
    versions and the commit observer."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def shared_counts(self, now: float | None = None) -> SharedCounts:
        """What every daemon on this database reports alike (ys.store.metrics.SharedCounts)."""
        from ys.store.sqlite.metrics import shared_counts

        return shared_counts(self._core.reader(), self._core.now(now))

    def event_stream(
        self, cursor: str | None = None, *, since: float | None = None, limit: int = 1000
    ) -> tuple[list[dict[str, Any]], str]:
        """Events of every execution after `cursor`, in commit order, and the cursor after
        them. Without a cursor: from `since` (epoch seconds), else from now (none yet)."""
        from ys.store.paging import check_cursor
        from ys.store.sqlite import stream

        c = self._core.reader()
        if cursor is not None:
            after = check_cursor(cursor)
        elif since is not None:
            after = stream.position_before(c, check_time(since, "since"))
        else:
            return [], str(stream.last_position(c))
        items, pos = stream.events_after(c, after, limit)
        return items, str(pos)

    # -- script versions --------------------------------------------------------------------

    def set_script(
        self,
        workflow: str,
        sha256: str,
        *,
        pin: bool = False,
        timeout: float | None = None,
        now: float | None = None,
    ) -> None:
        """The version of `workflow`'s script the daemon sees now: what admissions record,
        and what unpinned deliveries run; `timeout` counts from each later admission."""
        if timeout is not None:
            from ys.contract import check_time

            check_time(timeout, "timeout")
        from ys.store.sql.versions import set_script_tx

        t = self._core.now(now)
        self._core.write(lambda c: set_script_tx(c, workflow, sha256, pin, t, timeout))
        self._core.scripts[workflow] = sha256

    def scripts_needed(self) -> set[str]:
        """Versions a live execution needs, and each workflow's current one (ys gc keeps them)."""
        from ys.store.sql.versions import needed

        return needed(self._core.reader())

    def stale_scripts(self) -> dict[str, int]:
        """Per workflow: live executions admitted under an older version than the current."""
        from ys.store.sql.versions import stale

        return stale(self._core.reader())

    def observe_commits(self, observer: Callable[[float, int], None] | None) -> None:
        """Call `observer(seconds, requests)` after each commit of the writer (metrics)."""
        self._core.writer.observe = observer

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

        def tx(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR REPLACE INTO delivery_logs (execution_id, attempt, daemon_id, path, "
                "size, tail, ended_at) SELECT ?,?,?,?,?,?,? WHERE EXISTS (SELECT 1 FROM "
                "executions WHERE execution_id=?)",
                (execution_id, int(attempt), daemon_id, path, int(size), kept, t, execution_id),
            )

        self._core.write(tx)

    def log_tails(self, execution_id: str, attempt: int | None = None) -> list[LogTail]:
        """The kept log ends of an execution's deliveries (of one `attempt`), in order."""
        rows = self._core.reader().execute(
            "SELECT attempt, daemon_id, path, size, tail, ended_at FROM delivery_logs "
            "WHERE execution_id=? AND (? IS NULL OR attempt=?) ORDER BY attempt",
            (execution_id, attempt, attempt),
        )
        return [LogTail(a, d, p, s, bytes(b), e) for a, d, p, s, b, e in rows]
