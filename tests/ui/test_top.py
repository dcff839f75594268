"""`ys top`: the Now page in the terminal, through rich's test console and live in tmux."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.support import DaemonHandle, wait_until
from ys.commands.top import view

pytestmark = pytest.mark.e2e

FAILING = """
import ys

@ys.workflow
def main(step, params):
    step.run("boom", lambda: 1 / 0)
"""


def _text(renderable: Any, width: int = 140) -> str:
    console = Console(record=True, width=width, color_system=None, force_terminal=False)
    console.print(renderable)
    return console.export_text()


def test_a_frame_shows_what_runs_and_what_failed(daemon: DaemonHandle, gated: Any):
    daemon.write("fail.py", FAILING)
    c = daemon.client()
    gate = gated("top/running")
    c.trigger("fail", execution_id="top/failed")
    c.wait("top/failed", timeout=30)
    wait_until(lambda: c.overview()["running"], message="a running execution")
    frame = _text(view(c.overview()))
    assert "ys top" in frame and "running 1/4" in frame
    running = frame.split("Running (1)")[1].split("Due (")[0]
    assert "top/running" in running and "gate" in running
    failed = frame.split("Failed, 24 h (1)")[1]
    assert "top/failed" in failed and "ZeroDivisionError" in failed
    Path(gate).touch()
    c.wait("top/running", timeout=30)
    assert "Running (0)" in _text(view(c.overview()))
    assert "no answer yet" in _text(view(None))


def test_off_a_terminal_it_prints_one_frame(daemon: DaemonHandle):
    out = daemon.ys("top", timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("ys top")
    assert "Running (0)" in out.stdout
    data = daemon.ys("top", "--json", timeout=30)
    assert data.returncode == 0 and '"running": []' in data.stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_live_in_tmux_until_q(daemon: DaemonHandle, gated: Any):
    gate = gated("tmux/job")
    session = f"ys-top-{uuid.uuid4().hex[:8]}"
    env = " ".join(
        f"{k}={shlex.quote(v)}"
        for k, v in daemon.env.items()
        if k.startswith("YS_") or k in ("PATH", "HOME")
    )
    command = f"env {env} {shlex.quote(sys.executable)} -m ys top"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "150", "-y", "45", command], check=True
    )

    def screen() -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def alive() -> bool:
        return (
            subprocess.run(["tmux", "has-session", "-t", session], capture_output=True).returncode
            == 0
        )

    try:
        wait_until(lambda: "tmux/job" in screen(), message="the running execution in tmux")
        Path(gate).touch()
        wait_until(
            lambda: "Running (0)" in screen(),
            timeout=30,
            message="the frame to follow the execution's end",
        )
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        wait_until(lambda: not alive(), message="ys top to quit on q")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def test_a_frame_has_a_sparkline_of_the_last_hour(daemon: DaemonHandle):
    daemon.write("fail.py", FAILING)
    c = daemon.client()
    wait_until(lambda: "fail" in {w["name"] for w in c.workflows()["workflows"]})
    for i in range(3):
        c.trigger("fail", execution_id=f"spark/{i}")
        c.wait(f"spark/{i}", timeout=30)
    o = c.overview()
    assert len(o["activity"]["hour"]) == 60 and len(o["activity"]["day"]) == 144
    assert sum(b["failed"] for b in o["activity"]["day"]) == 3
    assert o["activity"]["hour"][-1]["started"] + o["activity"]["hour"][-2]["started"] >= 1
    frame = _text(view(o))
    line = next(x for x in frame.splitlines() if x.startswith("last hour"))
    assert "3 started, 0 completed, 3 failed" in line and "█" in line
