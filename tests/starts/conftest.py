"""Fixtures for RFC 003's conformance tables (durable workflow start).

`open_store` opens SqliteStores on one temp file (explicit `now=` everywhere, so no test
depends on the wall clock) and closes them at the end. `shared_daemon` is a real daemon in a
temp home shared by the end-to-end tests of one module (starting daemons is the slow part).
Plain helpers are in starts_support.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from starts_support import T0, DaemonHandle, make_home  # noqa: E402

from ys.store.sqlite import SqliteStore  # noqa: E402

# -- the store (runtime adapter) -------------------------------------------------------------


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ys.db"


@pytest.fixture
def open_store(db_path: Path) -> Iterator[Callable[..., SqliteStore]]:
    """`open_store(group_commit=False, path=None)`: a store on this test's database file (or
    another one); every store opened is closed at the end."""
    opened: list[SqliteStore] = []

    def _open(group_commit: bool = False, path: Path | None = None, **kw: Any) -> SqliteStore:
        s = SqliteStore(path or db_path, group_commit=group_commit,
                        clock=lambda: T0, **kw)
        opened.append(s)
        return s

    yield _open
    for s in reversed(opened):
        s.close()


@pytest.fixture
def store(open_store: Callable[..., SqliteStore]) -> SqliteStore:
    return open_store()


@pytest.fixture
def caller(store: SqliteStore) -> str:
    """A directly triggered caller execution (`order-42`)."""
    return store.admit("charge-order", {"order": 42}, execution_id="order-42",
                       now=T0).execution_id


# -- a real daemon shared by one module's end-to-end tests -----------------------------------


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    """A running daemon in a temp home, for one test module (tests that need their own
    environment, such as crash points, start their own)."""
    h = make_home(tmp_path_factory.mktemp("starts-home"))
    try:
        h.start(concurrency=8)
        yield h
    finally:
        h.stop()


@pytest.fixture(scope="module")
def crash_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    """A running daemon whose workers SIGKILL themselves once right after the start client
    answered (start.after_client) and once right after step.call's start (call.after_client),
    before the step is recorded. The marker files are `<home>/start.marker` and
    `<home>/call.marker`; workers inherit the daemon's environment."""
    root = tmp_path_factory.mktemp("crash-home")
    h = make_home(root)
    h.env["YS_CRASH_POINTS"] = (f"start.after_client@{h.home / 'start.marker'},"
                                f"call.after_client@{h.home / 'call.marker'}")
    try:
        h.start(concurrency=8)
        yield h
    finally:
        h.stop()


@pytest.fixture
def fx(tmp_path: Path) -> Path:
    """A folder for one test's side-effect files and go-files (readable by its workflows)."""
    d = tmp_path / "fx"
    d.mkdir(mode=0o700, exist_ok=True)
    return d
