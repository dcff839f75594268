"""Fixtures for the command-line tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cli_support import DaemonHandle, daemons_for, make_home, stop_pids


@pytest.fixture
def autostart_home(tmp_path) -> Iterator[DaemonHandle]:
    """A home with no daemon where commands may start one (YS_AUTOSTART unset); any daemon
    started there is stopped by PID afterwards."""
    h = make_home(tmp_path)
    h.env.pop("YS_AUTOSTART", None)
    try:
        yield h
    finally:
        stop_pids(daemons_for(h.home))
        h.stop()  # and reap the one the test started itself, if it did


@pytest.fixture(scope="session")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    """One daemon for the CLI tests that only add executions with their own IDs (a daemon
    per test would take most of the suite's time). Its folder holds cli_support.WORKFLOWS."""
    with make_home(tmp_path_factory.mktemp("cli")) as h:
        yield h.start()


@pytest.fixture
def fresh(tmp_path) -> Iterator[DaemonHandle]:
    """A daemon of one's own (for tests that need it empty, or stop it)."""
    with make_home(tmp_path) as h:
        yield h.start()
