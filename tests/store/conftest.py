"""The store contract suite runs against every adapter listed in ADAPTERS.

A test asks for `store` (a fresh, empty store) or `store_factory` (to open stores with options,
reopen one on the same database, or start another database). What only an adapter can do
(tamper with a stored row, make its storage full, hold its writer) sits behind the adapter, so
a new adapter (PostgreSQL) joins the whole suite with one more entry in ADAPTERS.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.pg_support import PostgresAdapter
from tests.support import wait_until
from ys.store.sqlite import SqliteStore


class Adapter(Protocol):
    name: str
    group_commit: bool  # whether open(..., group_commit=True) batches writes

    def create(self, directory: Path) -> str:
        """The location of a new, empty database."""

    def open(self, location: str, **options: Any) -> Any:
        """A store on the database at `location` (options: group_commit, lease_seconds)."""

    def tamper(self, location: str, execution_id: str, **columns: Any) -> None:
        """Change a stored record behind the store's back (for verify)."""

    def limit_space(self, store: Any, extra_bytes: int | None) -> None:
        """Let the database grow by at most `extra_bytes` more (None: no limit)."""

    @contextmanager
    def hold_writes(self, store: Any, waiting: int) -> Iterator[list[int]]:
        """Block the store's writer until `waiting` writes queue behind it, then let them run;
        yields the sizes of the batches committed meanwhile."""


class SqliteAdapter:
    name = "sqlite"
    group_commit = True

    def __init__(self) -> None:
        self._n = itertools.count()

    def create(self, directory: Path) -> str:
        return str(directory / f"ys-{next(self._n)}.db")

    def open(self, location: str, **options: Any) -> SqliteStore:
        return SqliteStore(location, **options)

    def tamper(self, location: str, execution_id: str, **columns: Any) -> None:
        conn = sqlite3.connect(location)
        try:
            sets = ", ".join(f"{name} = ?" for name in columns)
            with conn:
                conn.execute(
                    f"UPDATE executions SET {sets} WHERE execution_id = ?",
                    (*columns.values(), execution_id),
                )
        finally:
            conn.close()

    def limit_space(self, store: SqliteStore, extra_bytes: int | None) -> None:
        conn = store._writer.conn
        if extra_bytes is None:
            conn.execute("PRAGMA max_page_count = 4294967294")
            return
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + max(1, extra_bytes // page_size)}")

    @contextmanager
    def hold_writes(self, store: SqliteStore, waiting: int) -> Iterator[list[int]]:
        writer = store._writer
        sizes: list[int] = []
        commit = writer._commit

        def counting_commit(reqs: list[Any]) -> None:
            sizes.append(len(reqs))
            commit(reqs)

        writer._commit = counting_commit  # type: ignore[method-assign]
        entered, release = threading.Event(), threading.Event()

        def block(conn: sqlite3.Connection) -> None:
            entered.set()
            release.wait(30)

        blocker = threading.Thread(target=store.write, args=(block,))
        blocker.start()
        try:
            assert entered.wait(30), "the writer never ran the blocking request"
            yield sizes
            wait_until(lambda: writer._queue.qsize() >= waiting, timeout=30.0,
                       interval=0.001, message=f"{waiting} writes queued")
        finally:
            release.set()
            blocker.join(30)


ADAPTERS: list[Adapter] = [SqliteAdapter(), PostgresAdapter()]


class StoreFactory:
    """Opens stores of one adapter and closes whatever is still open at the end of the test."""

    def __init__(self, adapter: Adapter, directory: Path) -> None:
        self.adapter = adapter
        self.directory = directory
        self.location = adapter.create(directory)
        self._open: list[tuple[Any, str]] = []

    def __call__(self, **options: Any) -> Any:
        """A store on this test's database."""
        return self.open(self.location, **options)

    def open(self, location: str, **options: Any) -> Any:
        if options.get("group_commit") and not self.adapter.group_commit:
            pytest.skip(f"the {self.adapter.name} adapter has no group commit")
        store = self.adapter.open(location, **options)
        self._open.append((store, location))
        return store

    def fresh(self, **options: Any) -> Any:
        """A store on a new, empty database."""
        return self.open(self.adapter.create(self.directory), **options)

    def location_of(self, store: Any) -> str:
        return next(loc for s, loc in self._open if s is store)

    def reopen(self, store: Any, **options: Any) -> Any:
        """Close `store` (a runtime restart) and open its database again."""
        location = self.location_of(store)
        store.close()
        return self.open(location, **options)

    def tamper(self, store: Any, execution_id: str, **columns: Any) -> None:
        self.adapter.tamper(self.location_of(store), execution_id, **columns)

    def close_all(self) -> None:
        for store, _ in reversed(self._open):
            store.close()
        self._open.clear()


@pytest.fixture(params=ADAPTERS, ids=lambda adapter: adapter.name)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    bind = getattr(request.param, "bind", None)
    if bind is not None:  # an adapter whose databases live on a server (PostgreSQL)
        bind(request)
    factory = StoreFactory(request.param, tmp_path)
    yield factory
    factory.close_all()


@pytest.fixture
def store(store_factory: StoreFactory) -> Any:
    return store_factory()
