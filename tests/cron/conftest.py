"""Fixtures for the one-box tests: every schedule test (cron expressions, slots, catch-up,
overlap, intervals, pauses, crontab import), shell steps, gc, service and doctor. Helpers are in
cron_support.py; the generic daemon fixtures (`ys_home`, `daemon`) in tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cron.cron_support import DaemonHandle, make_home


@pytest.fixture
def home(tmp_path: Path) -> Iterator[DaemonHandle]:
    """A home of this test's own with hello.py and gate.py, not started; every daemon the
    test starts there is stopped at the end (by PID)."""
    h = make_home(tmp_path)
    try:
        yield h
    finally:
        h.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    """One running daemon for a module whose tests each use their own names."""
    h = make_home(tmp_path_factory.mktemp("cron"))
    try:
        yield h.start(concurrency=8)
    finally:
        h.stop()
