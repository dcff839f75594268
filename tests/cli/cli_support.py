"""Helpers for the command-line tests: small workflows, JSON output, lines read while a
command runs, and daemons that a command started by itself (stopped by PID)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support import GATE, DaemonHandle, wait_until
from tests.support import alive as _alive
from tests.support import make_home as _make_home

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TERMINAL = {"completed", "failed", "cancelled"}

HELLO = """
    import ys

    @ys.workflow
    def main(step, params):
        greeting = step.run("greet", lambda: f"hello, {params.get('name', 'world')}")
        print(greeting, flush=True)
        return {"greeting": greeting}
"""

BOOM = """
    import ys

    @ys.workflow
    def main(step, params):
        print("about to fail", flush=True)
        raise ValueError("boom")
"""

NAP = """
    import ys

    @ys.workflow
    def main(step, params):
        print(f"before attempt={step.attempt}", flush=True)
        step.sleep("nap", params.get("seconds", 3600))
        print(f"after attempt={step.attempt}", flush=True)
        return "rested"
"""

# Holds its delivery open until the file params["gate"] exists (the test releases it).


WORKFLOWS = {"hello.py": HELLO, "boom.py": BOOM, "nap.py": NAP, "gate.py": GATE, "pager.py": HELLO}


def make_home(root: Path) -> DaemonHandle:
    """A home under `root` with WORKFLOWS written (before any daemon loads the folder)."""
    h = _make_home(root)
    for name, source in WORKFLOWS.items():
        h.write(name, source)
    return h


def out_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def admit(daemon: DaemonHandle, workflow: str, execution_id: str, **params: Any) -> None:
    """Set-up through the client (a `ys` process per set-up would double the suite's time)."""
    with daemon.client() as c:
        c.trigger(workflow, params, execution_id=execution_id)


def one_error_line(result: subprocess.CompletedProcess[str], code: str) -> str:
    """The command failed with exactly one stderr line `CODE: what happened; what to do`."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{code}: "), lines[0]
    assert "; " in lines[0], lines[0]
    return lines[0]


def wait_status(daemon: DaemonHandle, execution_id: str, *statuses: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        record: dict[str, Any] = daemon.client(timeout=5).get(execution_id)
        return record if record["status"] in statuses else None

    result: dict[str, Any] = wait_until(check, message=f"{execution_id} to be {statuses}")
    return result


class Streaming:
    """A command run in the background whose stdout lines are collected as they come."""

    def __init__(self, daemon: DaemonHandle, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ys", *args],
            env=daemon.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def finish(self, timeout: float = 30) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code

    def kill(self) -> None:
        """Stop it if it still runs, and close its pipes (what a test's `finally` calls)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._reader.join(timeout=5)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def daemons_for(home: Path) -> list[int]:
    """PIDs of live `ys.daemon run` processes whose YS_HOME is `home` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            if b"ys.daemon" not in cmd or b"run" not in cmd:
                continue
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"YS_HOME={home}".encode() in env and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def stop_pids(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            wait_until(lambda p=pid: not _alive(p), timeout=20, message=f"pid {pid} to exit")
        except AssertionError:
            os.kill(pid, signal.SIGKILL)
