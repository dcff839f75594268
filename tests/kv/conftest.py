"""Fixtures for the durable key-value store tests.

`open_store` opens SqliteStores on this test's temp file (every store test passes `now=`, so
nothing depends on the wall clock) and closes them at the end. The real daemon fixtures
(`ys_home`, `daemon`) come from tests/conftest.py. Plain helpers are in kv_support.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kv_support import T0, DaemonHandle, approval, make_home, patient  # noqa: E402

from ys.store.sqlite import SqliteStore  # noqa: E402
from ys.testing import WorkflowTest  # noqa: E402


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ys.db"


@pytest.fixture
def open_store(db_path: Path) -> Iterator[Callable[..., SqliteStore]]:
    """`open_store(group_commit=False, path=None)`: a store on this test's database file (or
    another one); every store opened is closed at the end, even when the test fails."""
    opened: list[SqliteStore] = []

    def _open(group_commit: bool = False, path: Path | None = None, **kw: Any) -> SqliteStore:
        kw.setdefault("clock", lambda: T0)
        s = SqliteStore(path or db_path, group_commit=group_commit, **kw)
        opened.append(s)
        return s

    yield _open
    for s in reversed(opened):
        s.close()


@pytest.fixture(params=[False, True], ids=["direct", "group-commit"])
def store(request: pytest.FixtureRequest, open_store: Callable[..., SqliteStore]) -> SqliteStore:
    """A store on a fresh file, once with one transaction per write and once with the group
    writer (each write in a savepoint of a shared transaction), as the daemon runs it."""
    return open_store(group_commit=request.param)


@pytest.fixture
def wt() -> Iterator[WorkflowTest]:
    """ys.testing with the `approval` and `patient` workflows and a clock at T0."""
    with WorkflowTest({"approval": approval, "patient": patient}, start=T0) as t:
        yield t


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    """A running daemon with the approval workflow, shared by one module's end-to-end tests
    (each uses its own store keys); tests that stop, kill or crash a daemon start their own."""
    h = make_home(tmp_path_factory.mktemp("kv-home"))
    try:
        h.start(concurrency=8)
        yield h
    finally:
        h.stop()


@pytest.fixture
def own_daemon(tmp_path: Path) -> Iterator[DaemonHandle]:
    """A daemon home of this test's own with the approval workflow, not started; whatever
    the test starts is stopped at the end (by PID)."""
    h = make_home(tmp_path)
    try:
        yield h
    finally:
        h.stop()
