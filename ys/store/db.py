"""SQLite plumbing: one `connect()` with the pragmas, one transaction helper, the group writer.

Durability is never traded for speed: WAL with synchronous=FULL, every write in a
`BEGIN IMMEDIATE` transaction. Throughput comes from the group writer, which runs many
requests in one transaction and answers each only after COMMIT; a request that fails, fails
alone.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ys.errors import ResourceExhausted, YsError

T = TypeVar("T")
BUSY_TIMEOUT_MS = 30_000


def connect(path: str) -> sqlite3.Connection:
    """A connection with ys's pragmas; autocommit mode so transactions are explicit."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
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


def translate(exc: BaseException) -> BaseException:
    """SQLITE_FULL becomes RESOURCE_EXHAUSTED; everything else passes through unchanged."""
    if is_full(exc):
        return ResourceExhausted(
            "RESOURCE_EXHAUSTED", "the disk or database is full; free space and retry"
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


class _Request:
    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        self.fn = fn
        self.future: Future[Any] = Future()


class Writer:
    """Runs write functions against one connection.

    Direct mode runs each function in its own transaction under a lock. Group mode runs a
    thread that drains the queue, executes up to `batch` requests in one transaction,
    commits, then answers each (see `_commit` for how a failing request fails alone).
    """

    def __init__(self, conn: sqlite3.Connection, group: bool = False, batch: int = 256) -> None:
        self.conn = conn
        self.group = group
        self.batch = batch
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        if group:
            self._thread = threading.Thread(target=self._run, name="ys-writer", daemon=True)
            self._thread.start()

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if not self.group:
            with self._lock, transaction(self.conn):
                return fn(self.conn)
        req = _Request(fn)
        self._queue.put(req)
        return req.future.result()  # type: ignore[no-any-return,unused-ignore]

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            reqs = [first]
            while len(reqs) < self.batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                reqs.append(nxt)
            self._commit(reqs)

    def _commit(self, reqs: list[_Request]) -> None:
        """Run the batch in one transaction, without a savepoint per request (two statements
        and two GIL hand-offs fewer per request). A request that raises fails alone: the
        transaction is rolled back, that request answered with its error (it never runs
        again), and the rest of the batch is run again from the start."""
        conn = self.conn
        pending = reqs
        while pending:
            values: list[Any] = []
            failed: tuple[int, BaseException] | None = None
            try:
                conn.execute("BEGIN IMMEDIATE")
                for i, req in enumerate(pending):
                    try:
                        values.append(req.fn(conn))
                    except BaseException as exc:
                        failed = (i, exc)
                        break
                if failed is None:
                    conn.execute("COMMIT")
            except BaseException as exc:  # BEGIN or COMMIT failed: the whole batch fails
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                err = translate(exc)
                for req in pending:
                    req.future.set_exception(err)
                return
            if failed is None:
                for req, value in zip(pending, values, strict=True):
                    req.future.set_result(value)
                return
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            i, error = failed
            pending[i].future.set_exception(translate(error))
            pending = pending[:i] + pending[i + 1:]


class StoreCore(Protocol):
    """What the store's method groups (effects, kv, schedules, gc) use of `SqliteStore`."""

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    def reader(self) -> sqlite3.Connection: ...

    def _now(self, now: float | None) -> float: ...


if TYPE_CHECKING:
    MethodGroup = StoreCore
else:
    MethodGroup = object  # at run time a plain base: SqliteStore supplies the plumbing
