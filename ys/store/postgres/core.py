"""What the clients of one PostgresStore share: the URL, the writer (its own connection), a
pool of read connections, the listener that hears other daemons' writes, and the clock.

Reads run at READ COMMITTED, each statement on its own committed state; a read of several
statements that must agree (describe, a delivery's state, verify) runs in one REPEATABLE
READ, READ ONLY transaction (`snapshot`), so it sees one committed state as SQLite's read
transactions do.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ys.contract import check_time
from ys.store.base import Then
from ys.store.postgres import connect, schema
from ys.store.postgres.dialect import POSTGRES
from ys.store.postgres.schema import migrate
from ys.store.postgres.writer import Writer
from ys.store.sql.dialect import Dialect, FormatConnection
from ys.store.sql.reads import verify

T = TypeVar("T")
DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_HOLDER = "store"  # the lease holder of a store opened without a daemon ID
POLL_SECONDS = 1.0  # the most a lost notification delays another daemon
log = logging.getLogger("ys.store.postgres")


class Core:
    def __init__(
        self,
        url: str,
        *,
        group_commit: bool = False,
        clock: Callable[[], float] = time.time,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        read_only: bool = False,
        daemon_id: str | None = None,
        readers: int = 8,
    ) -> None:
        from psycopg_pool import ConnectionPool

        self.url = url
        self.clock = clock
        self.lease_seconds = lease_seconds
        self.read_only = read_only
        self.holder = daemon_id or DEFAULT_HOLDER
        self.dialect: Dialect = POSTGRES
        self.prepares = False  # admissions run their bodies (no prepared rows)
        self.pid = os.getpid()
        if not read_only:
            with connect(url) as conn:
                migrate(conn)
        self.writer = Writer(lambda: connect(url), group=group_commit and not read_only)
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=readers,
            kwargs={"autocommit": True},
            open=True,
            timeout=30.0,
            check=ConnectionPool.check_connection,
            name="ys-readers",
        )
        self._watchers: list[tuple[Callable[[], None], Callable[[str], None] | None]] = []
        self._listener: threading.Thread | None = None
        self._stopping = threading.Event()

    def now(self, now: float | None) -> float:
        """The time of a write: the clock's, or the caller's `now` (checked)."""
        return self.clock() if now is None else check_time(now, "now")

    def admission_rows(self, *args: Any) -> Any:
        raise NotImplementedError("PostgreSQL admissions run their bodies (prepares=False)")

    # Each body gets its connection wrapped to take the core's `?` statements
    # (ys/store/sql/dialect.py); `inserts` and `value` (prepared rows) are SQLite's alone.

    def _wrap(self, fn: Callable[[Any], T]) -> Callable[[Any], T]:
        dialect = self.dialect
        return lambda conn: fn(FormatConnection(conn, dialect))

    def write(self, fn: Callable[[Any], T], inserts: Any = None, value: Any = None) -> T:
        return self.writer.write(self._wrap(fn))

    async def write_async(
        self, fn: Callable[[Any], T], inserts: Any = None, value: Any = None
    ) -> T:
        return await self.writer.write_async(self._wrap(fn))

    def submit(self, fn: Callable[[Any], T], then: Then) -> None:
        self.writer.submit(self._wrap(fn), then)

    def database(self, c: Any) -> dict[str, Any]:
        """The database (its URL without a password), its size and its schema version."""
        from ys.settings import redact

        size = c.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        version = c.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        return {"path": redact(self.url), "bytes": int(size), "schema_version": int(version[0])}

    def script_recorded(self, workflow: str, sha256: str) -> None:
        """Nothing kept: admissions read `scripts` in their transactions (other daemons
        record versions too)."""

    def observe_commits(self, observer: Callable[[float, int], None] | None) -> None:
        self.writer.observe = observer

    def health(self) -> Any:
        """Schema, row counts and re-folded histories, in one snapshot, never written."""
        from ys.settings import redact
        from ys.store.protocols import Health

        location = redact(self.url)

        def read(c: Any) -> Any:
            version = schema.version(c)
            present = {
                r[0]
                for r in c.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                )
            }
            rows = {
                t: int(c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                for t in schema.TABLES
                if t in present
            }
            return Health(
                location,
                [],
                schema_version=version,
                schema_expected=len(schema.MIGRATIONS),
                missing_tables=sorted(set(schema.TABLES) - present),
                rows=rows,
                mismatches=verify(c) if "executions" in present else [],
                executions=rows.get("executions", 0),
            )

        try:
            return self.snapshot(read)
        except Exception as exc:
            return Health(location, [], error=str(exc))

    def read(self, fn: Callable[[Any], T]) -> T:
        """`fn` on a pooled connection, statement by statement (READ COMMITTED)."""
        with self.pool.connection() as conn:
            return fn(FormatConnection(conn, self.dialect))

    def snapshot(self, fn: Callable[[Any], T]) -> T:
        """`fn` in one REPEATABLE READ, READ ONLY transaction: one committed state."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return fn(FormatConnection(conn, self.dialect))

    # -- hearing other daemons --------------------------------------------------------------

    def watch(
        self, on_due: Callable[[], None], on_change: Callable[[str], None] | None = None
    ) -> None:
        """Call `on_due` (on the listener's thread) when any daemon commits a write that makes
        something due, and at least every POLL_SECONDS in case a notification was lost (the
        listener's connection broke, say); `on_change(execution_id)` when an execution's
        history grew."""
        self._watchers.append((on_due, on_change))
        if self._listener is None:
            self._listener = threading.Thread(
                target=self._listen, name="ys-pg-listener", daemon=True
            )
            self._listener.start()

    def _call(self, due: bool, changed: str | None) -> None:
        for on_due, on_change in list(self._watchers):
            try:
                if due:
                    on_due()
                if on_change is not None and changed is not None:
                    on_change(changed)
            except Exception:  # a watcher's failure must not stop the listener
                log.exception("a watcher failed")

    def _listen(self) -> None:
        while not self._stopping.is_set():
            try:
                with connect(self.url) as conn:
                    conn.execute("LISTEN ys_due")
                    conn.execute("LISTEN ys_changed")
                    while not self._stopping.is_set():
                        # each notification as it comes; then, once the interval is over,
                        # the due watchers run anyway (the polling fallback)
                        for n in conn.notifies(timeout=POLL_SECONDS):
                            if n.channel == "ys_changed":
                                self._call(False, n.payload)
                            else:
                                self._call(True, None)
                        self._call(True, None)
            except Exception as exc:
                if self._stopping.is_set():
                    return
                log.warning("listening for other daemons' writes: %s; polling meanwhile", exc)
                self._call(True, None)
                self._stopping.wait(POLL_SECONDS)

    # -- the end ----------------------------------------------------------------------------

    def close(self) -> None:
        self._stopping.set()
        self.writer.close()
        self.pool.close()
        if self._listener is not None:
            self._listener.join(timeout=POLL_SECONDS * 3)
            self._listener = None
