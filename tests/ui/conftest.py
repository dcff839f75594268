"""The dashboard's tests: pages through the daemon's socket, `ys ui` and a real browser."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.support import GATE, DaemonHandle
from tests.ui.ui_support import Populated, UiSession, populate

SCREENSHOTS = Path(
    os.environ.get("YS_UI_SCREENSHOTS") or Path(tempfile.gettempdir()) / "ys-ui-screenshots"
)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    shots = sorted(SCREENSHOTS.glob("*.png")) if SCREENSHOTS.is_dir() else []
    if shots:
        terminalreporter.write_line(f"dashboard screenshots ({len(shots)}): {SCREENSHOTS}")


@pytest.fixture
def ui(daemon: DaemonHandle) -> UiSession:
    """A session signed in to the daemon's dashboard (over its socket)."""
    return UiSession(daemon).sign_in()


@pytest.fixture
def gated(daemon: DaemonHandle, tmp_path: Path) -> Any:
    """gated(id) admits a GATE execution that runs until its gate file exists; returns the
    gate's path (touch it to let the execution finish)."""
    daemon.write("gate.py", GATE)

    def admit(execution_id: str) -> Path:
        gate = tmp_path / f"{execution_id.replace('/', '_')}.go"
        daemon.client().trigger("gate", {"gate": str(gate)}, execution_id=execution_id)
        return gate

    return admit


@pytest.fixture
def populated(daemon: DaemonHandle) -> Populated:
    """The daemon's store with a row of every kind the dashboard shows (ui_support.populate)."""
    return populate(daemon)
