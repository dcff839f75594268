"""What the clients of one SqliteStore share: the file, its one writer, a read connection per
thread (WAL lets reads run beside the writer) and the clock."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ys.contract import check_time
from ys.store.protocols import Health, Parent
from ys.store.reading import DatabaseInfo
from ys.store.sql.dialect import Dialect
from ys.store.sql.reads import verify
from ys.store.sqlite.admissions import admission_inserts
from ys.store.sqlite.db import Inserts, Writer, connect
from ys.store.sqlite.dialect import SQLITE
from ys.store.sqlite.schema import MIGRATIONS, migrate

T = TypeVar("T")
DEFAULT_LEASE_SECONDS = 30.0
HOLDER = "store"  # leases name no holder here: one daemon owns the file


class Core:
    """One SQLite file. Thread-safe: writes go through `writer`, reads through `reader()`.

    Satisfies `ys.store.sql.core.Core`; `write`, `write_async` and `submit` are the writer's
    own methods (one attribute lookup on the hot paths). Read-only (`ys doctor`): nothing is migrated or written, and the file is opened so that
    SQLite cannot write it either."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        group_commit: bool = False,
        clock: Callable[[], float] = time.time,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        read_only: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self.clock = clock
        self.lease_seconds = lease_seconds
        self.read_only = read_only
        self.dialect: Dialect = SQLITE
        self.holder = HOLDER
        self.pid = os.getpid()
        self.prepares = True  # admissions come with their rows computed (the group writer's)
        conn = connect(self.path, read_only=read_only)
        if not read_only:
            migrate(conn)
        # workflow -> its current script version (`scripts`, which only set_script writes):
        # an admission's rows are computed before its transaction, without a look-up
        self.scripts: dict[str, str] = {}
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name='scripts'").fetchone():
            self.scripts = dict(conn.execute("SELECT workflow, sha256 FROM scripts").fetchall())
        self.writer = Writer(conn, group=group_commit and not read_only)
        self.write = self.writer.write
        self.write_async = self.writer.write_async
        self.submit = self.writer.submit
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()

    def now(self, now: float | None) -> float:
        """The time of a write: the clock's, or the caller's `now` (checked like every time
        the store is given)."""
        return self.clock() if now is None else check_time(now, "now")

    def admission_rows(
        self,
        execution_id: str,
        workflow: str,
        params_json: str,
        context_json: str,
        parent: Parent | None,
        at: float,
        tags: dict[str, str] | None,
        due_at: float | None = None,
    ) -> Inserts:
        """A new execution's rows, prepared for the group writer (ys/store/sqlite/admissions.py),
        naming the workflow's script version as last recorded (`scripts`)."""
        sha = self.scripts.get(workflow)
        return admission_inserts(
            execution_id, workflow, params_json, context_json, parent, at, sha, tags, due_at
        )

    def database(self, c: sqlite3.Connection) -> DatabaseInfo:
        """The file, its size on disk (with the write-ahead log) and its schema version."""
        size = 0
        for suffix in ("", "-wal"):
            try:
                size += os.stat(self.path + suffix).st_size
            except OSError:
                pass
        version = c.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
        return DatabaseInfo(self.path, size, int(version[0]))

    def script_recorded(self, workflow: str, sha256: str) -> None:
        """The workflow's current script version, as just recorded (prepared admissions
        name it without a look-up)."""
        self.scripts[workflow] = sha256

    def observe_commits(self, observer: Callable[[float, int], None] | None) -> None:
        self.writer.observe = observer

    def health(self) -> Health:
        """`ys doctor`'s checks of the file: integrity, schema, rows, re-folded histories."""
        return health(self.reader(), self.path)

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` on this thread's read connection (each statement its own read)."""
        return fn(self.reader())

    def snapshot(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn` in one read transaction: one committed state."""
        c = self.reader()
        c.execute("BEGIN")
        try:
            return fn(c)
        finally:
            c.execute("COMMIT")

    def reader(self) -> sqlite3.Connection:
        """This thread's read connection."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path, read_only=self.read_only)
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def close(self) -> None:
        if self.writer.close():  # else the writer is still in a transaction: leave it be
            self.writer.conn.close()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()


def health(c: sqlite3.Connection, location: str) -> Health:
    """Integrity, schema, row counts and re-folded histories, in one read snapshot (the
    daemon may go on writing meanwhile)."""
    import sqlite_utils  # its introspection lists the tables and counts their rows

    files = [
        p for p in (Path(location), Path(f"{location}-wal"), Path(f"{location}-shm")) if p.exists()
    ]
    try:
        integrity = [str(r[0]) for r in c.execute("PRAGMA integrity_check")]
        c.execute("BEGIN")
        try:
            mismatches = verify(c)
            count = int(c.execute("SELECT COUNT(*) FROM executions").fetchone()[0])
            rows = {t.name: int(t.count) for t in sqlite_utils.Database(c).tables}
            version = int(
                c.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
            )
        finally:
            c.execute("COMMIT")
    except sqlite3.Error as exc:
        return Health(location, files, error=str(exc))
    expected = {m for script in MIGRATIONS for m in re.findall(r"CREATE TABLE (\w+)", script)}
    return Health(
        location,
        files,
        integrity=[] if integrity == ["ok"] else integrity,
        schema_version=version,
        schema_expected=len(MIGRATIONS),
        missing_tables=sorted(expected - set(rows)),
        rows=rows,
        mismatches=mismatches,
        executions=count,
    )
