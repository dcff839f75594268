"""Fixtures for RFC 004's conformance tables (durable external effect).

`open_store` opens SqliteStores on one temp file (explicit `now=` everywhere, so no test
depends on the wall clock) and closes them at the end. `shared_daemon` is a real daemon in a
temp home shared by one module's end-to-end tests that need no environment of their own
(starting daemons is the slow part); tests with crash points use `ys_home` (tests/conftest.py).
Plain helpers are in effects_support.py; the fake payment provider is in fake_provider.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from effects_support import T0, DaemonHandle  # noqa: E402

from ys.store.sqlite import SqliteStore  # noqa: E402


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ys.db"


@pytest.fixture
def open_store(db_path: Path) -> Iterator[Callable[..., SqliteStore]]:
    """`open_store(group_commit=False, path=None)`: a store on this test's database file (or
    another one); every store opened is closed at the end."""
    opened: list[SqliteStore] = []

    def _open(group_commit: bool = False, path: Path | None = None, **kw: Any) -> SqliteStore:
        s = SqliteStore(path or db_path, group_commit=group_commit, clock=lambda: T0, **kw)
        opened.append(s)
        return s

    yield _open
    for s in reversed(opened):
        s.close()


@pytest.fixture
def store(open_store: Callable[..., SqliteStore]) -> SqliteStore:
    return open_store()


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    """A running daemon (lease 3 s, retry base 0.2 s) in a temp home, for one test module."""
    root = tmp_path_factory.mktemp("effects-home")
    home = root / "home"
    home.mkdir(mode=0o700)
    workflows = home / "workflows"
    workflows.mkdir(mode=0o700)
    h = DaemonHandle(home, workflows, {"YS_LEASE_SECONDS": "3", "YS_RETRY_BASE_SECONDS": "0.2",
                                       "YS_GRACE_SECONDS": "2"})
    try:
        h.start(concurrency=8)
        yield h
    finally:
        h.stop()
