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
from ys.errors import DatabaseUnavailable, YsError
from ys.store.base import Then
from ys.store.postgres import connect, schema
from ys.store.postgres.dialect import POSTGRES
from ys.store.postgres.reach import Reach
from ys.store.postgres.schema import migrate
from ys.store.postgres.writer import Writer, bounded, translate
from ys.store.reading import DatabaseInfo
from ys.store.sql.core import DEFAULT_HOLDER
from ys.store.sql.dialect import Dialect, FormatConnection
from ys.store.sql.reads import verify

T = TypeVar("T")
DEFAULT_LEASE_SECONDS = 30.0
POLL_SECONDS = 1.0  # the most a lost notification delays another daemon
MEASURE_EVERY = 10.0  # seconds between two measures of the server's clock
MEASURE_SLACK = 0.005  # a change of the offset smaller than this is noise
# How long a read waits for a pooled connection (all of them busy). While the server is known
# to be lost (the writer or the listener could not connect), a read skips the pool and tries
# a connection of its own, which answers DATABASE_UNAVAILABLE at once if the server is still
# gone, instead of waiting for a server that is not there (docs/design.md, "On PostgreSQL").
POOL_WAIT_SECONDS = 30.0
log = logging.getLogger("ys.store.postgres")


def _run_read(conn: Any, fn: Callable[[Any], T], snapshot: bool) -> T:
    """`fn` on `conn` through the core's `?` statements (docs/design.md: Adding a SQL adapter)."""
    wrapped = FormatConnection(conn, POSTGRES)
    if not snapshot:
        return fn(wrapped)
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        return fn(wrapped)


def _direct(url: str) -> Any:
    """A connection of one read's own, or DATABASE_UNAVAILABLE."""
    try:
        return connect(url)
    except YsError as exc:
        raise DatabaseUnavailable("DATABASE_UNAVAILABLE", f"{exc.message}; retry") from None


def _flushed(pg: Any) -> None:
    """Every byte sent so far is on the wire before a Sync: psycopg's sync sends what it can and
    then waits for answers, so a statement bigger than the socket's buffer (a 2 MiB params) would
    leave its tail unsent and both sides waiting. Reads while it writes, so a server that
    answers meanwhile never blocks on a full socket either."""
    import selectors

    if pg.flush() == 0:
        return
    # a selector, not select.select: the socket's descriptor may be above 1024 on a busy daemon
    with selectors.DefaultSelector() as sel:
        sel.register(pg.socket, selectors.EVENT_READ | selectors.EVENT_WRITE)
        while pg.flush() == 1:
            sel.select()
            pg.consume_input()


class _Synced:
    """A cursor of a pipelined transaction whose answers (`fetch*`, `rowcount`) wait for its
    statement's result: a body that checks pays that round trip, one that does not sends on.

    The wait ends what was sent with a Sync, not a bare flush (which psycopg's own fetch
    sends): only after a Sync is the server's session "idle in transaction" while this client
    works on the answer, so a daemon stopped there has its session ended by
    `idle_in_transaction_session_timeout` and the event log's lock freed (ys/store/postgres/
    writer.py; docs/design.md, "On PostgreSQL"). Same round trips either way."""

    __slots__ = ("cur",)

    def __init__(self, cur: Any) -> None:
        self.cur = cur

    def _answered(self) -> Any:
        cur = self.cur
        # psycopg's pipeline and its wait for this statement's result (private names: a
        # psycopg without them fails the contract suite here, never miscounts)
        pipeline = cur.connection._pipeline
        if pipeline is not None and cur.pgresult is None:
            _flushed(cur.connection.pgconn)
            pipeline.sync()
        cur._fetch_pipeline()
        return cur

    @property
    def rowcount(self) -> int:
        return int(self._answered().rowcount)

    def fetchone(self) -> Any:
        return self._answered().fetchone()

    def fetchall(self) -> Any:
        return self._answered().fetchall()

    def fetchmany(self, size: int = 0) -> Any:
        return self._answered().fetchmany(size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cur, name)

    def __iter__(self) -> Any:
        return iter(self._answered())


class PipelinedConnection(FormatConnection):
    """The writer's connection as a body sees it (ys/store/postgres/writer.py pipelines the
    transaction): the core's `?` statements, and a `rowcount` that is the statement's own."""

    __slots__ = ()

    def execute(self, sql: str, params: Any = None) -> Any:
        return _Synced(super().execute(sql, params))

    def executemany(self, sql: str, rows: Any) -> Any:
        return _Synced(super().executemany(sql, rows))


class Core:
    def __init__(
        self,
        url: str,
        *,
        group_commit: bool = False,
        clock: Callable[[], float] | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        read_only: bool = False,
        daemon_id: str | None = None,
        readers: int = 8,
    ) -> None:
        from psycopg_pool import ConnectionPool

        self.url = url
        # The server's clock: this box's plus the offset measured on a connection (at start,
        # then at each listener's round); an explicit `clock` (tests) is used as it is.
        self.offset = 0.0
        self._measures = clock is None
        self.clock: Callable[[], float] = clock or self._server_time
        self.lease_seconds = lease_seconds
        self.read_only = read_only
        self.holder = daemon_id or DEFAULT_HOLDER
        self.dialect: Dialect = POSTGRES
        self.prepares = False  # admissions run their bodies (no prepared rows)
        self.pid = os.getpid()
        with connect(url) as conn:
            self.measure(conn)
            if not read_only:
                migrate(conn)
        self.reach = Reach()
        self.writer = Writer(
            lambda: bounded(connect(url)), group=group_commit and not read_only, reach=self.reach
        )
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=readers,
            kwargs={"autocommit": True},
            open=True,
            timeout=POOL_WAIT_SECONDS,
            check=ConnectionPool.check_connection,
            # a lost server is tried again with backoff; past this the pool gives the
            # connection up and makes one anew when a read asks (its backoff starts over)
            reconnect_timeout=5.0,
            name="ys-readers",
        )
        self._watchers: list[tuple[Callable[[], None], Callable[[str, str], None] | None]] = []
        self._listener: threading.Thread | None = None
        self._stopping = threading.Event()
        self._listening = threading.Event()  # the listener has listened once
        # psycopg_pool logs each failed try to reconnect; the writer and the listener say
        # once that the server is lost and once that it is back
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

    def _server_time(self) -> float:
        return time.time() + self.offset

    def measure(self, conn: Any) -> None:
        """Measure how far this box's clock is from the server's on `conn`: leases, deadlines,
        due times and schedule slots are compared with the server's, never a box's own
        (docs/design.md, "On PostgreSQL"), so boxes whose clocks differ still deliver each execution once."""
        if not self._measures:
            return
        before = time.time()
        server = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0]
        after = time.time()
        offset = float(server) - (before + after) / 2
        if abs(offset - self.offset) < MEASURE_SLACK:  # the round trip's noise: kept steady
            return
        if abs(offset) >= 1.0 and abs(offset - self.offset) >= 1.0:
            log.warning(
                "this box's clock is %.1f s %s the database server's; ys keeps the server's time",
                abs(offset),
                "behind" if offset > 0 else "ahead of",
            )
        self.offset = offset

    def now(self, now: float | None) -> float:
        """The time of a write: the clock's, or the caller's `now` (checked)."""
        return self.clock() if now is None else check_time(now, "now")

    def admission_rows(self, *args: Any) -> Any:
        raise NotImplementedError("PostgreSQL admissions run their bodies (prepares=False)")

    # Each body gets its connection wrapped to take the core's `?` statements
    # (ys/store/sql/dialect.py); `inserts` and `value` (prepared rows) are SQLite's alone.

    def _wrap(self, fn: Callable[[Any], T]) -> Callable[[Any], T]:
        dialect = self.dialect
        return lambda conn: fn(PipelinedConnection(conn, dialect))

    def write(self, fn: Callable[[Any], T], inserts: Any = None, value: Any = None) -> T:
        return self.writer.write(self._wrap(fn))

    async def write_async(
        self, fn: Callable[[Any], T], inserts: Any = None, value: Any = None
    ) -> T:
        return await self.writer.write_async(self._wrap(fn))

    def submit(self, fn: Callable[[Any], T], then: Then) -> None:
        self.writer.submit(self._wrap(fn), then)

    def database(self, c: Any) -> DatabaseInfo:
        """The database (its URL without a password), its size and its schema version."""
        from ys.settings import redact

        size = c.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        version = c.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        return DatabaseInfo(redact(self.url), int(size), int(version[0]))

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
        return self._on_pooled(fn, snapshot=False)

    def snapshot(self, fn: Callable[[Any], T]) -> T:
        """`fn` in one REPEATABLE READ, READ ONLY transaction: one committed state."""
        return self._on_pooled(fn, snapshot=True)

    def _on_pooled(self, fn: Callable[[Any], T], *, snapshot: bool) -> T:
        """A read, run once more on another connection when its connection broke under it
        (the server restarted after the pool checked it: a read is safe to repeat); a server
        that cannot be reached is DATABASE_UNAVAILABLE, as for a write."""
        import psycopg
        from psycopg_pool import PoolTimeout

        for attempt in range(2):
            conn: Any = None
            try:
                if self.reach.up:
                    try:
                        with self.pool.connection(timeout=POOL_WAIT_SECONDS) as conn:
                            return _run_read(conn, fn, snapshot)
                    except PoolTimeout:
                        pass
                # The pool's own tries to reconnect back off to seconds apart (and a busy
                # pool has none free): one connection of the read's own, which also tells
                # at once whether the server is back.
                with _direct(self.url) as conn:
                    self.reach.back("read")  # it answers: up again, before the writer knows
                    return _run_read(conn, fn, snapshot)
            except psycopg.OperationalError as exc:
                if attempt or conn is None or not (conn.broken or conn.closed):
                    raise translate(exc) from None
        raise AssertionError("unreachable")

    def database_up(self) -> bool:
        """Whether the server answers: neither the writer nor the listener is cut off."""
        return self.reach.up

    # -- hearing other daemons --------------------------------------------------------------

    def watch(
        self, on_due: Callable[[], None], on_change: Callable[[str, str], None] | None = None
    ) -> None:
        """Call `on_due` (on the listener's thread) when another daemon commits a write that
        makes something due, and at least every POLL_SECONDS in case a notification was lost (the
        listener's connection broke, say); `on_change(execution_id, status)` when an
        execution's history grew (its status then: the notification carries it)."""
        self._watchers.append((on_due, on_change))
        if self._listener is None:
            self._listener = threading.Thread(
                target=self._listen, name="ys-pg-listener", daemon=True
            )
            self._listener.start()
            # listening before the caller goes on (its API answers next): a commit of another
            # daemon after this is heard (a server that does not answer: polling meanwhile)
            self._listening.wait(timeout=5.0)

    def _call(self, due: bool, changed: str | None) -> None:
        """`changed`: a ys_changed payload, "<status> <execution_id>" (schema migration 17)."""
        status, _, execution_id = (changed or "").partition(" ")
        for on_due, on_change in list(self._watchers):
            try:
                if due:
                    on_due()
                if on_change is not None and execution_id:
                    on_change(execution_id, status)
            except Exception:  # a watcher's failure must not stop the listener
                log.exception("a watcher failed")

    def _listen(self) -> None:
        cut = False  # the last connection broke: the next is tried at once, once
        while not self._stopping.is_set():
            try:
                conn = connect(self.url)
            except Exception as exc:
                # The server cannot be reached: polling meanwhile (the due watchers run)
                if self._stopping.is_set():
                    return
                self.reach.lost("listener", exc)
                self._call(True, None)
                self._stopping.wait(POLL_SECONDS)
                continue
            try:
                with conn:
                    conn.execute("LISTEN ys_due")
                    conn.execute("LISTEN ys_changed")
                    self.writer.forget_old_pids()
                    self._listening.set()
                    self.reach.back("listener")
                    cut = False
                    self.measure(conn)
                    measured = time.monotonic()
                    while not self._stopping.is_set():
                        # each notification as it comes; then, once the interval is over,
                        # the due watchers run anyway (the polling fallback)
                        for n in conn.notifies(timeout=POLL_SECONDS):
                            if n.pid in self.writer.pids:
                                # this daemon's own commit: it knows what it wrote, and must
                                # not act on it (kill its own worker, say: docs/design.md, "On PostgreSQL")
                                continue
                            if n.channel == "ys_changed":
                                self._call(False, n.payload)
                            else:
                                self._call(True, None)
                        self._call(True, None)
                        if time.monotonic() - measured >= MEASURE_EVERY:
                            self.measure(conn)
                            measured = time.monotonic()
            except Exception as exc:
                # The connection broke (a restart, pg_terminate_backend, a proxy): what was
                # sent meanwhile is not heard, so the due watchers run; a new one at once
                # (the server may be up), then, if that breaks too, after a pause
                if self._stopping.is_set():
                    return
                log.debug("the listener's connection broke: %s", exc)
                self._call(True, None)
                if cut:
                    self._stopping.wait(POLL_SECONDS)
                cut = True

    # -- the end ----------------------------------------------------------------------------

    def close(self) -> None:
        self._stopping.set()
        self.writer.close()
        self.pool.close()
        if self._listener is not None:
            self._listener.join(timeout=POLL_SECONDS * 3)
            self._listener = None
