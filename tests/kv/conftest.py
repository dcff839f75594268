"""Fixtures for the durable key-value store tests.

`open_store` (tests/conftest.py) opens SqliteStores on this test's temp file, with the clock
at this folder's T0 (every store test passes `now=`, so nothing depends on the wall clock),
and closes them at the end. The real daemon fixtures (`ys_home`, `daemon`) come from
tests/conftest.py too. Plain helpers are in kv_support.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kv_support import T0, DaemonHandle, approval, make_home, patient

from ys.store.sqlite import SqliteStore
from ys.testing import WorkflowTest


@pytest.fixture
def store_t0() -> float:
    return T0


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
    with make_home(tmp_path_factory.mktemp("kv-home")) as h:
        yield h.start(concurrency=8)


@pytest.fixture
def own_daemon(tmp_path: Path) -> Iterator[DaemonHandle]:
    """A daemon home of this test's own with the approval workflow, not started; whatever
    the test starts is stopped at the end (by PID)."""
    with make_home(tmp_path) as h:
        yield h
