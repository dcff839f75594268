"""The PostgreSQL group writer: requests that arrive together share one transaction.

As the SQLite writer (ys/store/sqlite/db.py), one thread (ys.store.sql.writer) drains a queue, runs up to `batch` write
functions in one READ COMMITTED transaction, commits, and only then answers each; a request
that raises fails alone (the transaction is rolled back and the rest of the batch runs again
without it). What PostgreSQL adds: a transaction that loses a deadlock to another daemon's
(rows locked in another order) or a serialization failure is rolled back and the whole batch
runs again, and a connection that broke is made again for the next batch. Durability is the
server's: COMMIT returns once the WAL is flushed (synchronous_commit is never turned off).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, TypeVar, cast

from ys.errors import DatabaseUnavailable, ResourceExhausted
from ys.store.postgres.reach import Reach
from ys.store.postgres.schema import EVENT_LOG_LOCK
from ys.store.sql.requests import UNSET, Inserts, Request, closed_error, settle
from ys.store.sql.writer import GroupWriter

T = TypeVar("T")
log = logging.getLogger("ys.store.postgres")
TRANSIENT_RETRIES = 8  # deadlocks, serialization failures and lock timeouts, per batch
# No write transaction may hold the event log's lock across a wait on a stopped client
# (docs/design.md, "On PostgreSQL"): the server ends a writer's session idle in a transaction
# this long (its daemon SIGSTOPped, say), and a writer's statement waits this long for a
# lock before it is rolled back and its batch tried again.
IDLE_IN_TRANSACTION_SECONDS = 2.0
LOCK_TIMEOUT_SECONDS = 5.0
_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
_LOCK = f"SELECT pg_advisory_xact_lock({int(EVENT_LOG_LOCK)})"


class _Unattributed(Exception):
    """A statement of a pipelined batch failed where its request cannot be told."""


def translate(exc: BaseException) -> BaseException:
    """A full disk becomes RESOURCE_EXHAUSTED, a lost server DATABASE_UNAVAILABLE (retry);
    everything else passes through unchanged."""
    import psycopg

    if isinstance(exc, psycopg.errors.DiskFull | psycopg.errors.OutOfMemory):
        return ResourceExhausted(
            "RESOURCE_EXHAUSTED", "the PostgreSQL server is out of space; free space and retry"
        )
    if isinstance(exc, psycopg.OperationalError) and not isinstance(exc, psycopg.errors.Diagnostic):
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return DatabaseUnavailable(
            "DATABASE_UNAVAILABLE", f"the connection to PostgreSQL broke ({detail}); retry"
        )
    return exc


def transient(exc: BaseException) -> bool:
    import psycopg

    return isinstance(
        exc,
        psycopg.errors.DeadlockDetected
        | psycopg.errors.SerializationFailure
        | psycopg.errors.LockNotAvailable,  # lock_timeout
    )


def bounded(conn: Any) -> Any:
    """`conn` with its waits bounded for a writer: the session ends if its transaction stays
    idle past IDLE_IN_TRANSACTION_SECONDS, a lock is waited for LOCK_TIMEOUT_SECONDS at most."""
    try:
        conn.execute(
            f"SET idle_in_transaction_session_timeout = {int(IDLE_IN_TRANSACTION_SECONDS * 1000)}"
        )
        conn.execute(f"SET lock_timeout = {int(LOCK_TIMEOUT_SECONDS * 1000)}")
    except BaseException:
        conn.close()
        raise
    return conn


class Writer(GroupWriter):
    """Runs write functions, each given the connection inside its transaction.

    Direct mode (group=False) runs each function in its own transaction under a lock; group
    mode runs a thread (ys.store.sql.writer) that commits many at once (see the module
    docstring)."""

    thread_name = "ys-pg-writer"

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        group: bool = False,
        batch: int = 256,
        reach: Reach | None = None,
    ) -> None:
        self._connect = connect
        self.reach = reach or Reach()
        self.conn: Any = connect()
        # The server processes ("backend PIDs") of this writer's connections: a notification
        # sent by one of them is of this daemon's own commit (Core's listener ignores it).
        self.pids: frozenset[int] = frozenset({self.conn.info.backend_pid})
        self._pids_lock = threading.Lock()
        self._committing = False  # COMMIT was sent: a broken connection now leaves it unknown
        super().__init__(group, batch)

    def _direct(self, fn: Callable[[Any], T], inserts: Inserts | None, value: T | None) -> T:
        with self._lock:
            if self._closed:
                raise closed_error()
            req = Request(fn, None, None)
            self._commit([req])
            req.done = None  # answered in place: nobody waits on the lock
            if req.error is not None:
                raise req.error
            return cast(T, req.result)

    def forget_old_pids(self) -> None:
        """Only the current connection's process is ours from now on: called when the
        listener (re)connects, as nothing an older one sent can reach it then (a process
        number the server may give another daemon's session later)."""
        with self._pids_lock:
            try:
                self.pids = frozenset({self.conn.info.backend_pid})
            except Exception:  # being replaced: the next connection adds its own
                self.pids = frozenset()

    def _closed_down(self) -> None:
        self.conn.close()

    def _commit(self, reqs: list[Request]) -> None:
        """Run the batch, retrying it whole after a deadlock or a serialization failure, and
        once on a new connection when the old one turned out broken before COMMIT was sent
        (the server rolled the transaction back: nothing of it was written); whatever still
        has no answer at the end gets the error that stopped it."""
        try:
            reconnected = False
            if self.conn.closed or self.conn.broken:
                # replaced before use: lost at the last batch
                if not self._reconnect():
                    raise DatabaseUnavailable(
                        "DATABASE_UNAVAILABLE",
                        "the database does not answer; retry once it does",
                    )
                reconnected = True
            for attempt in range(TRANSIENT_RETRIES):
                self._committing = False
                try:
                    self._run_batch(reqs)
                    return
                except Exception as exc:
                    self._rollback()
                    lost = self.conn.closed or self.conn.broken
                    if lost and not self._committing and not reconnected:
                        # a connection the server ended (a restart, pg_terminate_backend)
                        # while idle: the first statement finds out; once more on a new one
                        reconnected = True
                        if self._reconnect():
                            continue
                    if not transient(exc) or attempt == TRANSIENT_RETRIES - 1:
                        raise
                    log.debug("batch of %d retried after %s", len(reqs), type(exc).__name__)
        except BaseException as exc:
            err = translate(exc)
            for req in reqs:
                if req.result is UNSET and req.error is None:
                    req.error = err
            if self.conn.closed or self.conn.broken:
                self._reconnect()

    def _run_batch(self, reqs: list[Request]) -> None:
        """One transaction for the requests not yet answered, pipelined (one round trip per
        read a body needs the answer of, plus one for the writes and COMMIT: docs/design.md,
        "On PostgreSQL"). A statement's SQL error comes back only at the next sync, maybe
        inside a later request's body, so it cannot be pinned on its request there: the
        batch is rolled back and run again a statement at a time, where it can."""
        try:
            self._run_pending(reqs, pipelined=True)
        except _Unattributed:
            self._rollback()  # nothing was committed: a failed statement aborts the batch
            self._committing = False
            self._run_pending(reqs, pipelined=False)

    def _run_pending(self, reqs: list[Request], *, pipelined: bool) -> None:
        """A request that raises is answered with its error (it never runs again), the
        transaction is rolled back, and the others run again from the start. A failed
        statement aborts a PostgreSQL transaction, so this is also how a request's SQL error
        fails it alone."""
        import psycopg

        conn = self.conn
        pending = [r for r in reqs if r.result is UNSET and r.error is None]
        while pending:
            values: list[Any] = []
            failed: tuple[int, BaseException] | None = None
            try:
                with conn.pipeline() if pipelined else nullcontext():
                    # The event log's lock first (schema migration 7): a transaction that
                    # appends events holds it to commit, so positions follow commit order.
                    # Taken before any row lock, a writer never holds rows while it waits for
                    # it (no deadlock between daemons); writes across daemons commit one at a
                    # time, as SQLite's do. Sent with the first statement that needs an answer.
                    conn.execute(_BEGIN)
                    conn.execute(_LOCK)
                    for i, req in enumerate(pending):
                        try:
                            values.append(req.fn(conn))
                        except Exception as exc:
                            if transient(exc) or conn.broken or conn.closed:
                                raise  # the batch's fault: retried or failed whole
                            if pipelined and isinstance(exc, psycopg.Error):
                                raise _Unattributed() from exc
                            failed = (i, exc)
                            break
                    if failed is None:
                        self._committing = True  # from here a lost connection leaves it unknown
                        conn.execute("COMMIT")  # sent with the writes, at the pipeline's end
            except psycopg.Error as exc:
                if transient(exc) or conn.broken or conn.closed or not pipelined:
                    raise
                raise _Unattributed() from exc
            if failed is None:
                for req, value in zip(pending, values, strict=True):
                    req.result = settle(value)  # its reads came back with the COMMIT
                return
            self._rollback()
            i, error = failed
            pending[i].error = translate(error)
            pending = pending[:i] + pending[i + 1 :]

    def _rollback(self) -> None:
        try:
            if not self.conn.closed and not self.conn.broken:
                self.conn.execute("ROLLBACK")
        except Exception:  # the connection is gone: made again for the next batch
            pass

    def _reconnect(self) -> bool:
        """A new connection for the next batch; whether it was made (the reach is told:
        ys.store.postgres.reach)."""
        try:
            self.conn.close()
        except Exception:
            pass
        try:
            self.conn = self._connect()
        except Exception as exc:  # tried again at the next batch
            self.reach.lost("writer", exc)
            return False
        with self._pids_lock:
            self.pids = self.pids | {self.conn.info.backend_pid}
        self.reach.back("writer")
        return True
