"""Fixtures of the PostgreSQL tests beyond the server and database ones (tests/pg_support.py,
loaded by tests/conftest.py for every folder)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from tests.pg_support import Databases, PgServer
from tests.support import T0, DaemonHandle, make_home, write_script
from ys.store.postgres import PostgresStore

THREE_STEPS = """
    @ys.workflow
    def main(step, params):
        step.run("one", note, params["dir"], "one")
        step.run("two", block, params["dir"], "two")
        step.run("three", note, params["dir"], "three")
        return "done"
"""


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


@pytest.fixture
def three_step_home(tmp_path, pg_own_server: PgServer) -> Iterator[Callable[[str], DaemonHandle]]:
    """`three_step_home(prelude)`: a home on a new database of the test's own server with the
    workflow `three` (steps one, two and three; two blocks until `<dir>/two.go`) written
    after `prelude` (tests/support.py's), its daemon started (one); stopped after the test."""
    with ExitStack() as stack:

        def make(prelude: str) -> DaemonHandle:
            url = Databases(pg_own_server.url).create()
            h = stack.enter_context(make_home(tmp_path, YS_DATABASE=url))
            write_script(h, "three", THREE_STEPS, prelude)
            h.start(concurrency=2)
            return h

        yield make
