"""Fixtures shared by every test folder: a real daemon in a temporary YS_HOME (always stopped by
PID) and SqliteStores on a temp file with an explicit clock. The plain helpers they use live in
tests/support.py; the names older modules import from here (`from tests.conftest import
DaemonHandle, wait_until, ...`) are re-exported."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# A throw-away PostgreSQL server (session) and a fresh database per test: tests/pg_support.py.
from tests.pg_support import pg_databases, pg_server, pg_url  # noqa: E402, F401

# The repository root is on sys.path (pyproject's pytest `pythonpath`), so `tests` imports as
# a package from every folder.
from tests.support import (
    EXAMPLES,
    REPO,
    T0,
    DaemonHandle,
    alive,
    make_home,
    wait_until,
)
from ys.store.sqlite import SqliteStore  # noqa: E402

_alive = alive  # the name tests/cron/cron_support.py imports

__all__ = ["EXAMPLES", "REPO", "DaemonHandle", "_alive", "wait_until"]


# -- a real daemon ------------------------------------------------------------------------------


@pytest.fixture
def ys_home(tmp_path: Path) -> Iterator[DaemonHandle]:
    """A temporary home with an empty workflows folder (0700); no daemon started."""
    with make_home(tmp_path) as h:
        yield h


@pytest.fixture
def daemon(ys_home: DaemonHandle) -> DaemonHandle:
    """A running daemon in a temporary home."""
    return ys_home.start()


# -- stores on a temp file (explicit clock) ------------------------------------------------------


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ys.db"


@pytest.fixture
def store_t0() -> float:
    """The clock of the stores `open_store` opens (a folder may override it)."""
    return T0


@pytest.fixture
def open_store(db_path: Path, store_t0: float) -> Iterator[Callable[..., SqliteStore]]:
    """`open_store(group_commit=False, path=None, **kw)`: a store on this test's database file
    (or another one) whose clock stands at `store_t0` unless `clock=` is given; every store
    opened is closed at the end, even when the test fails."""
    opened: list[SqliteStore] = []

    def _open(group_commit: bool = False, path: Path | None = None, **kw: Any) -> SqliteStore:
        kw.setdefault("clock", lambda: store_t0)
        s = SqliteStore(path or db_path, group_commit=group_commit, **kw)
        opened.append(s)
        return s

    yield _open
    for s in reversed(opened):
        s.close()


@pytest.fixture
def store(open_store: Callable[..., SqliteStore]) -> SqliteStore:
    return open_store()


# -- CI runs every test ----------------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under CI (CI=true, as .ci/run runs) a skipped test is a failed one: the browser and
    PostgreSQL tests must run there, and .ci/run installs what they need."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, which must run every test: {report.longrepr}"
