"""The store contract suite runs against every adapter listed in adapters.ADAPTERS.

A test asks for `store` (a fresh, empty store), `both_modes` (the same, once with one
transaction per write and once with the group writer, where the adapter has one) or
`store_factory` (to open stores with options, reopen one on the same database, or start
another database). What only an adapter can do (tamper with a stored row, read rows as another
process would, make its storage full, hold its writer, fail a write part-way) sits behind the
adapter (tests/store/adapters.py), so a new adapter (PostgreSQL) joins the whole suite with
one more entry in ADAPTERS.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.store.adapters import ADAPTERS, Adapter


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

    def rows(self, store: Any, table: str) -> list[dict[str, Any]]:
        """`table`'s rows in `store`'s database, read as another process would."""
        return self.adapter.rows(self.location_of(store), table)

    def snapshot(
        self,
        store: Any,
        tables: tuple[str, ...] = ("executions", "events", "steps", "kv", "kv_waiters"),
    ) -> dict[str, Any]:
        """Every row a write can touch, to compare before and after."""
        return {table: self.rows(store, table) for table in tables}

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


@pytest.fixture(params=[False, True], ids=["direct", "group-commit"])
def both_modes(request: pytest.FixtureRequest, store_factory: StoreFactory) -> Any:
    """A fresh store, once with one transaction per write and once with the group writer
    (as the daemon runs it)."""
    return store_factory(group_commit=request.param)
