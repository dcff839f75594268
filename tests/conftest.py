"""Fixtures shared by every test folder: a real daemon in a temporary YS_HOME (always stopped by
PID). Stores for the contract suite come from tests/store/conftest.py, one per adapter. The
plain helpers they use live in tests/support.py; the names older modules import from here
(`from tests.conftest import DaemonHandle, wait_until, ...`) are re-exported."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# A throw-away PostgreSQL server (session) and a fresh database per test: tests/pg_support.py.
from tests.pg_support import (  # noqa: E402, F401
    pg_databases,
    pg_own_server,
    pg_server,
    pg_url,
)

# The repository root is on sys.path (pyproject's pytest `pythonpath`), so `tests` imports as
# a package from every folder.
from tests.support import (
    EXAMPLES,
    REPO,
    DaemonHandle,
    alive,
    make_home,
    wait_until,
)

_alive = alive  # the name tests/cron/cron_support.py imports

# pytest-xdist's workers run with a terminal's size in COLUMNS and LINES (80x24); every ys
# the tests start would cut its tables to it. The suite runs as on a pipe, wherever it runs.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

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


# -- no socket left open -------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _close_transports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every ys.client.Transport a test opens (a `Client`, `daemon.client()`, a raw one) is
    closed when the test ends: an unclosed socket is a ResourceWarning, which this suite
    treats as an error (pyproject's filterwarnings), and tests should not each close theirs."""
    from ys import client

    made: list[Any] = []
    init = client.Transport.__init__

    def tracked(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(client.Transport, "__init__", tracked)
    yield
    for transport in made:
        transport.close()


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
