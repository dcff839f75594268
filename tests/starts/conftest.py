"""Fixtures for RFC 003's conformance tables (durable workflow start) of the driver, the
runner and a real daemon; the start client itself is tested per adapter in
tests/store/test_start_client.py. `shared_daemon` is a real daemon in a temp home shared by the
end-to-end tests of one module (starting daemons is the slow part). Plain helpers are in
starts_support.py and tests/support.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import DaemonHandle, fixture_dir, make_home

# -- a real daemon shared by one module's end-to-end tests -----------------------------------


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    """A running daemon in a temp home, for one test module (tests that need their own
    environment, such as crash points, start their own)."""
    with make_home(tmp_path_factory.mktemp("starts-home")) as h:
        yield h.start(concurrency=8)


@pytest.fixture(scope="module")
def crash_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    """A running daemon whose workers SIGKILL themselves once right after the start client
    answered (start.after_client) and once right after step.call's start (call.after_client),
    before the step is recorded. The marker files are `<home>/start.marker` and
    `<home>/call.marker`; workers inherit the daemon's environment."""
    with make_home(tmp_path_factory.mktemp("crash-home")) as h:
        h.env["YS_CRASH_POINTS"] = (
            f"start.after_client@{h.home / 'start.marker'},"
            f"call.after_client@{h.home / 'call.marker'}"
        )
        yield h.start(concurrency=8)


@pytest.fixture
def fx(tmp_path: Path) -> Path:
    """A folder for one test's side-effect files and go-files (readable by its workflows)."""
    return fixture_dir(tmp_path)
