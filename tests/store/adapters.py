"""The store adapters the contract suite runs against, and what only an adapter can do.

A contract test drives a store through `ys.store.protocols.Store` alone. Where it must reach
behind the store (change a stored record, read its rows as another process would, make its
storage full, hold its writer, fail a write part-way, watch the statements it runs, force the
random bits of generated IDs), it asks the adapter here: the hooks are the adapter's own, so
the tests never name a connection, a writer or a module of the store.

Adding an adapter (PostgreSQL) is one class with these hooks and one entry in ADAPTERS.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.pg_support import PostgresAdapter
from tests.support import wait_until
from ys.store import open_store
from ys.store.protocols import Store


class Adapter(Protocol):
    name: str
    group_commit: bool  # whether open(..., group_commit=True) batches writes
    many_ids: int  # enough IDs under one prefix for `find`'s way through many matches

    def create(self, directory: Path) -> str:
        """The location of a new, empty database."""

    def open(self, location: str, **options: Any) -> Store:
        """A store on the database at `location` (options: group_commit, lease_seconds,
        clock)."""

    def clone(self, location: str, directory: Path) -> str:
        """A new database holding what `location` holds (closed: no store open on it)."""

    def tamper(self, location: str, execution_id: str, **columns: Any) -> None:
        """Change a stored record behind the store's back (for verify)."""

    def update_rows(self, location: str, table: str, where: dict[str, Any], **columns: Any) -> None:
        """Change the rows of `table` that match `where`, behind the store's back (a row an
        older version wrote, say)."""

    def rows(self, location: str, table: str) -> list[dict[str, Any]]:
        """Every row of `table`, read as another process would, in a stable order."""

    def delete_rows(self, location: str, *tables: str) -> None:
        """Delete every row of `tables` behind the store's back, in one transaction."""

    def limit_space(self, store: Store, extra_bytes: int | None) -> None:
        """Let the database grow by at most `extra_bytes` more (0: not at all; None: no
        limit): a write that needs more fails with RESOURCE_EXHAUSTED, as on a full disk."""

    def hold_writes(self, store: Store, waiting: int) -> AbstractContextManager[list[int]]:
        """Block the store's writer until `waiting` writes queue behind it, then let them run;
        yields the sizes of the batches committed meanwhile."""

    def fail_on_insert(
        self,
        store: Store,
        table: str,
        *,
        kind: str | None = None,
        skip: int = 0,
        after_row: bool = False,
    ) -> AbstractContextManager[None]:
        """Inside the block, the transaction that inserts its (skip+1)th row into `table`
        (with that `kind`, for events) fails there, with an error whose text holds
        "injected failure": what a full disk or a crash at that point would do. With
        after_row, the failure comes just after that row is written."""

    def on_statement(
        self, store: Store, callback: Callable[[str], None]
    ) -> AbstractContextManager[None]:
        """Call `callback(sql)` before each statement the store's writer runs."""

    def force_id_bits(self, monkeypatch: pytest.MonkeyPatch, bits: Iterable[int]) -> None:
        """Generated execution IDs take their random bits from `bits`, one per draw."""


def _connect(location: str) -> sqlite3.Connection:
    return sqlite3.connect(location, timeout=30)


class SqliteAdapter:
    """The SQLite adapter (`ys.store.sqlite`): a file per database."""

    name = "sqlite"
    group_commit = True

    @property
    def many_ids(self) -> int:
        """IDs under one prefix past which `find` takes its other way (walking the newest-
        first index instead of sorting the matches)."""
        from ys.store.sqlite.dialect import PREFIX_SORT_MAX

        return PREFIX_SORT_MAX + 10

    def __init__(self) -> None:
        self._n = itertools.count()

    def create(self, directory: Path) -> str:
        return str(directory / f"ys-{next(self._n)}.db")

    def open(self, location: str, **options: Any) -> Store:
        return open_store(location, **options)

    def clone(self, location: str, directory: Path) -> str:
        # The last store on it closed, so its WAL is checkpointed: the file stands alone.
        copy = self.create(directory)
        Path(copy).write_bytes(Path(location).read_bytes())
        return copy

    def tamper(self, location: str, execution_id: str, **columns: Any) -> None:
        self.update_rows(location, "executions", {"execution_id": execution_id}, **columns)

    def update_rows(self, location: str, table: str, where: dict[str, Any], **columns: Any) -> None:
        conn = _connect(location)
        try:
            sets = ", ".join(f"{name} = ?" for name in columns)
            match = " AND ".join(f"{name} = ?" for name in where)
            with conn:
                conn.execute(
                    f"UPDATE {table} SET {sets} WHERE {match}", (*columns.values(), *where.values())
                )
        finally:
            conn.close()

    def rows(self, location: str, table: str) -> list[dict[str, Any]]:
        conn = _connect(location)
        conn.row_factory = sqlite3.Row
        try:
            names = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            order = ", ".join(names)
            return [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")]
        finally:
            conn.close()

    def delete_rows(self, location: str, *tables: str) -> None:
        conn = _connect(location)
        try:
            with conn:
                for table in tables:
                    conn.execute(f"DELETE FROM {table}")
        finally:
            conn.close()

    @staticmethod
    def _writer_conn(store: Store) -> sqlite3.Connection:
        """The connection the store writes on (per-connection settings such as the page
        limit only hold there)."""
        conn: sqlite3.Connection = store.core.writer.conn  # type: ignore[attr-defined]
        return conn

    def limit_space(self, store: Store, extra_bytes: int | None) -> None:
        conn = self._writer_conn(store)
        if extra_bytes is None:
            conn.execute("PRAGMA max_page_count = 4294967294")
            return
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        grow = 0 if extra_bytes == 0 else max(1, extra_bytes // page_size)
        conn.execute(f"PRAGMA max_page_count = {pages + grow}")

    @contextmanager
    def hold_writes(self, store: Store, waiting: int) -> Iterator[list[int]]:
        writer = store.core.writer  # type: ignore[attr-defined]
        sizes: list[int] = []
        commit = writer._commit

        def counting_commit(reqs: list[Any]) -> None:
            sizes.append(len(reqs))
            commit(reqs)

        writer._commit = counting_commit
        entered, release = threading.Event(), threading.Event()

        def block(conn: sqlite3.Connection) -> None:
            entered.set()
            release.wait(30)

        blocker = threading.Thread(target=writer.write, args=(block,))
        blocker.start()
        try:
            assert entered.wait(30), "the writer never ran the blocking request"
            yield sizes
            wait_until(
                lambda: writer._queue.qsize() >= waiting,
                timeout=30.0,
                interval=0.001,
                message=f"{waiting} writes queued",
            )
        finally:
            release.set()
            blocker.join(30)

    @contextmanager
    def fail_on_insert(
        self,
        store: Store,
        table: str,
        *,
        kind: str | None = None,
        skip: int = 0,
        after_row: bool = False,
    ) -> Iterator[None]:
        # A trigger made on a connection of our own holds for the store's connections too.
        # The count lives in a table so that it is rolled back with the failed transaction.
        location = store.path  # type: ignore[attr-defined]
        when = f"WHEN NEW.kind = '{kind}'" if kind is not None else ""
        conn = _connect(location)
        try:
            with conn:
                conn.execute("CREATE TABLE ys_test_inserts (n INTEGER NOT NULL)")
                conn.execute("INSERT INTO ys_test_inserts VALUES (0)")
                conn.execute(
                    f"CREATE TRIGGER ys_test_fail {'AFTER' if after_row else 'BEFORE'} INSERT "
                    f"ON {table} {when} BEGIN UPDATE ys_test_inserts SET n = n + 1; "
                    f"SELECT RAISE(ABORT, 'injected failure') "
                    f"WHERE (SELECT n FROM ys_test_inserts) > {int(skip)}; END"
                )
            yield
        finally:
            with conn:
                conn.execute("DROP TRIGGER IF EXISTS ys_test_fail")
                conn.execute("DROP TABLE IF EXISTS ys_test_inserts")
            conn.close()

    @contextmanager
    def on_statement(self, store: Store, callback: Callable[[str], None]) -> Iterator[None]:
        conn = self._writer_conn(store)
        conn.set_trace_callback(callback)
        try:
            yield
        finally:
            conn.set_trace_callback(None)

    def force_id_bits(self, monkeypatch: pytest.MonkeyPatch, bits: Iterable[int]) -> None:
        from ys.store.sql import events

        offered = iter(bits)
        monkeypatch.setattr(events, "id_bits", lambda: next(offered))


ADAPTERS: list[Adapter] = [SqliteAdapter(), PostgresAdapter()]
BY_NAME: dict[str, Adapter] = {a.name: a for a in ADAPTERS}
