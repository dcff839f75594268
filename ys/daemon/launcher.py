"""How a delivery becomes a process. One small interface, so a warm launcher (fork from a
preloaded process, never carrying a database connection across the fork) can replace it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Protocol

from ys.daemon.registry import Workflow


class Launcher(Protocol):
    async def launch(self, workflow: Workflow, env: dict[str, str],
                     log_path: Path) -> asyncio.subprocess.Process: ...


class SpawnLauncher:
    """A fresh interpreter per delivery, in its own process group (so a kill takes it all)."""

    async def launch(self, workflow: Workflow, env: dict[str, str],
                     log_path: Path) -> asyncio.subprocess.Process:
        shell = workflow.kind != "python"
        if shell:
            # Shell workflows call `ys step ...`: the ys next to this interpreter comes first.
            argv = [workflow.path]
            bindir = os.path.dirname(sys.executable)
            env = {**env, "PATH": bindir + os.pathsep + env.get("PATH", os.defpath)}
        else:
            argv = [sys.executable, "-m", "ys.worker"]
        log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            return await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE if shell else fd, stderr=fd,
                env=env, cwd=str(Path(workflow.path).parent), start_new_session=True,
            )
        finally:
            os.close(fd)


def kill_group(proc: asyncio.subprocess.Process, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
