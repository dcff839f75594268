"""Fixtures for the durable-value tests of the SDK (ys.testing) and of a real daemon. The
value client itself is tested per adapter in tests/store/test_value_client.py. Plain helpers are in
kv_support.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kv_support import T0, DaemonHandle, approval, make_home, patient

from ys.testing import WorkflowTest


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
