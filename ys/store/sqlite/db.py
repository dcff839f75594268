"""SQLite plumbing: one `connect()` with the pragmas, one transaction helper, the group writer.

Durability is never traded for speed: WAL with synchronous=FULL, every write in a
`BEGIN IMMEDIATE` transaction. Throughput comes from the group writer, which runs many
requests in one transaction and answers each only after COMMIT; a request that fails, fails
alone.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import quote

from ys.errors import DatabaseUnavailable, ResourceExhausted, YsError
from ys.store.sql.requests import UNSET as _UNSET
from ys.store.sql.requests import Inserts as Inserts
from ys.store.sql.requests import Request as _Request
from ys.store.sql.writer import GroupWriter
from ys.store.sqlite.dialect import Connection

T = TypeVar("T")
log = logging.getLogger("ys.store")
BUSY_TIMEOUT_MS = 30_000
STATEMENT_CACHE = 512  # room for the group writer's multi-row INSERTs: one per row count


def connect(path: str, *, read_only: bool = False) -> sqlite3.Connection:
    """A connection with ys's pragmas; autocommit mode so transactions are explicit.
    Read-only: opened so that SQLite itself refuses to write (`ys doctor`)."""
    target, uri = path, False
    if read_only:
        target, uri = f"file:{quote(path)}?mode=ro", True
    conn = sqlite3.connect(
        target,
        isolation_level=None,
        check_same_thread=False,
        timeout=30,
        cached_statements=STATEMENT_CACHE,
        uri=uri,
        factory=Connection,  # carries the dialect the core's bodies read
    )
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if read_only:
        conn.execute("PRAGMA query_only=ON")
        return conn
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal" and path != ":memory:":
        raise YsError("INTERNAL", f"{path}: cannot switch the database to WAL (got {mode})")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def is_full(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and (
        getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
        or "database or disk is full" in str(exc)
    )


# The file cannot be written now: its disk went read-only (remounted after an error, say),
# failed, or the file cannot be opened again (SQLite's primary result codes).
_UNWRITABLE = (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN)


def is_unwritable(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.Error):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _UNWRITABLE  # an extended code keeps its primary one in its low byte
    return "readonly database" in str(exc) or "disk I/O error" in str(exc)


def translate(exc: BaseException) -> BaseException:
    """SQLITE_FULL becomes RESOURCE_EXHAUSTED, a file that cannot be written now (read-only,
    an I/O error) DATABASE_UNAVAILABLE (retry); everything else passes through unchanged."""
    if is_full(exc):
        return ResourceExhausted(
            "RESOURCE_EXHAUSTED", "the disk or database is full; free space and retry"
        )
    if is_unwritable(exc):
        return DatabaseUnavailable(
            "DATABASE_UNAVAILABLE",
            f"the database file cannot be written ({exc}): its disk may be read-only or "
            "failing; retry once it is writable",
        )
    return exc


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE .. COMMIT; on any error ROLLBACK and re-raise the original error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        err = translate(exc)
        if err is exc:
            raise
        raise err from exc


class Writer(GroupWriter):
    """Runs write functions against one connection.

    Direct mode runs each function in its own transaction under a lock. Group mode runs a
    thread (ys.store.sql.writer) that drains the queue, executes up to `batch` requests in one
    transaction, commits, then answers each (see `_run_batch` for how a failing request fails
    alone).

    A write may come prepared: `inserts`, rows computed before the transaction whose order
    does not matter, and the `value` to answer once they are committed. The group writer
    inserts a run of consecutive prepared writes with a few multi-row INSERTs; if that fails
    (an ID already taken), the batch is rolled back and runs again with each write of that run
    calling its `fn` instead, which decides what the write means then (a conflict, an
    existing execution).
    """

    def __init__(self, conn: sqlite3.Connection, group: bool = False, batch: int = 256) -> None:
        self.conn = conn
        super().__init__(group, batch)
        self.unwritable = False  # the last write found the file could not be written

    def _direct(
        self,
        fn: Callable[[sqlite3.Connection], T],
        inserts: Inserts | None,
        value: T | None,
    ) -> T:
        with self._lock:
            if inserts is not None:
                try:
                    with transaction(self.conn):
                        _insert(self.conn, inserts)
                    return value  # type: ignore[return-value]
                except Exception:
                    pass  # rolled back: `fn` decides what the write means
            with transaction(self.conn):
                return fn(self.conn)

    def _commit(self, reqs: list[_Request]) -> None:
        """Run the batch (see `_run_batch`); if something unforeseen breaks the writer's own
        code, the requests not yet answered get that error rather than wait forever."""
        try:
            self._run_batch(reqs)
        except BaseException as exc:
            err = translate(exc)
            for req in reqs:
                if req.result is _UNSET and req.error is None:
                    req.error = err
        finally:
            self._tell(reqs)  # answered by the group writer after this (_settle)

    def _tell(self, reqs: list[_Request]) -> None:
        """Say once that the file cannot be written, and once that it can again (a commit
        went through): not a line per failed write (docs/design.md, "Keeping and moving the
        data")."""
        if any(isinstance(r.error, DatabaseUnavailable) for r in reqs):
            if not self.unwritable:
                self.unwritable = True
                log.error(
                    "the database cannot be written: %s",
                    next(r.error for r in reqs if isinstance(r.error, DatabaseUnavailable)),
                )
        elif self.unwritable and any(r.result is not _UNSET for r in reqs):
            self.unwritable = False
            log.warning("the database can be written again")

    def _run_batch(self, reqs: list[_Request]) -> None:
        """Run the batch in one transaction, without a savepoint per request (two statements
        and two GIL hand-offs fewer per request). A request that raises fails alone: the
        transaction is rolled back, that request answered with its error (it never runs
        again), and the rest of the batch is run again from the start. A run of prepared
        requests is inserted together (see the class); if that fails, the transaction is
        rolled back and the batch runs again with those requests calling their `fn`."""
        conn = self.conn
        pending = reqs
        while pending:
            values: list[Any] = []
            failed: tuple[int, BaseException] | None = None
            retry = False
            try:
                conn.execute("BEGIN IMMEDIATE")
                i, n = 0, len(pending)
                while i < n:
                    req = pending[i]
                    if req.inserts is not None:
                        j = i + 1
                        while j < n and pending[j].inserts is not None:
                            j += 1
                        run = pending[i:j]
                        try:
                            _insert(conn, [row for r in run for row in r.inserts])  # type: ignore[union-attr]
                        except Exception:
                            for r in run:  # their own transaction bodies decide, next time
                                r.inserts = None
                            retry = True
                            break
                        values.extend(r.value for r in run)
                        i = j
                        continue
                    try:
                        values.append(req.fn(conn))
                    except BaseException as exc:
                        failed = (i, exc)
                        break
                    i += 1
                if failed is None and not retry:
                    conn.execute("COMMIT")
            except BaseException as exc:  # BEGIN or COMMIT failed: the whole batch fails
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                err = translate(exc)
                for req in pending:
                    req.error = err
                return
            if failed is None and not retry:
                for req, value in zip(pending, values, strict=True):
                    req.result = value
                return
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if failed is not None:
                i, error = failed
                pending[i].error = translate(error)
                pending = pending[:i] + pending[i + 1 :]


def _insert(conn: sqlite3.Connection, inserts: Inserts) -> None:
    """Prepared rows, grouped by statement (in the order statements first appear), each
    group inserted with one multi-row INSERT (several past _MAX_ROWS rows or the bound-variable
    limit): a statement per table per batch instead of one step per row. Every step lets go
    of the GIL and must take it back from the threads preparing the next batch, so fewer
    steps is what makes a batch quick."""
    by_sql: dict[str, list[tuple[Any, ...]]] = {}
    for sql, row in inserts:
        rows = by_sql.get(sql)
        if rows is None:
            by_sql[sql] = [row]
        else:
            rows.append(row)
    for sql, rows in by_sql.items():
        i, n = 0, len(rows)
        most = _most_rows(conn, len(rows[0]))
        while i < n:
            size = min(n - i, most)
            chunk = rows[i : i + size]
            conn.execute(_multi_row(sql, size), [v for row in chunk for v in row])
            i += size


_MAX_ROWS = 64  # rows per INSERT at most (each row count is its own cached statement)
_MULTI_ROW: dict[tuple[str, int], str] = {}


def _most_rows(conn: sqlite3.Connection, columns: int) -> int:
    """The most rows one INSERT may carry: at most _MAX_ROWS, and within the build's limit on
    bound variables (999 before SQLite 3.32, 32766 since)."""
    limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return min(_MAX_ROWS, max(1, limit // max(1, columns)))


def _multi_row(sql: str, rows: int) -> str:
    """`INSERT .. VALUES (?,..)` made to insert `rows` rows at once."""
    text = _MULTI_ROW.get((sql, rows))
    if text is None:
        head, sep, group = sql.rpartition(" VALUES ")
        if not sep or not group.startswith("("):
            raise ValueError(f"not a one-row INSERT .. VALUES statement: {sql!r}")
        text = head + sep + ",".join([group] * rows)
        _MULTI_ROW[(sql, rows)] = text
    return text
