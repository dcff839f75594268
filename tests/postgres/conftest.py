"""Fixtures of the PostgreSQL tests beyond the server and database ones (tests/pg_support.py,
loaded by tests/conftest.py for every folder)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support import T0
from ys.store.postgres import PostgresStore


@pytest.fixture
def daemons(pg_url: str) -> Iterator[Callable[..., list[PostgresStore]]]:
    """`daemons(n, **options)`: n stores on this test's database, lease holders d0, d1, ...,
    each on the clock T0 unless told otherwise; closed after the test."""
    opened: list[PostgresStore] = []

    def open_(n: int = 3, **options: Any) -> list[PostgresStore]:
        options.setdefault("clock", lambda: T0)
        stores = [PostgresStore(pg_url, daemon_id=f"d{i}", **options) for i in range(n)]
        opened.extend(stores)
        return stores

    yield open_
    for s in opened:
        s.close()
