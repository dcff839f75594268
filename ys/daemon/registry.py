"""The registry: the workflows folder, watched with watchfiles.

A `.py` file is a Python workflow, checked by importing it in a throw-away subprocess (never in
the daemon); any other executable file is a shell workflow. Scripts must belong to the user and
not be writable by others; symlinks may not lead out of the folder.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("ys.registry")


@dataclass(frozen=True)
class Workflow:
    name: str
    kind: str  # python | shell
    path: str
    error: str | None = None
    mtime: float = 0.0
    schedule: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "kind": self.kind, "path": self.path, "error": self.error,
            "schedule": self.schedule,
        }


def _skip(name: str) -> bool:
    return name.startswith((".", "_", "#")) or name.endswith(("~", ".swp", ".tmp", ".pyc"))


class Registry:
    def __init__(self, folder: Path, on_change: Callable[[Workflow], Awaitable[None]] | None = None):
        self.folder = folder
        self.workflows: dict[str, Workflow] = {}
        self.on_change = on_change
        self._watch_task: asyncio.Task[None] | None = None
        self.uid = os.getuid()

    def get(self, name: str) -> Workflow | None:
        return self.workflows.get(name)

    async def load(self) -> None:
        """Scan the whole folder once (the daemon answers only after this)."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        paths = [p for p in sorted(self.folder.iterdir()) if not _skip(p.name)]
        found = await asyncio.gather(*(self._inspect(p) for p in paths))
        self.workflows = {w.name: w for w in found if w is not None}

    def start_watching(self) -> None:
        self._watch_task = asyncio.create_task(self._watch(), name="registry-watch")

    async def stop(self) -> None:
        if self._watch_task is not None:
            self._watch_task.cancel()
            try:
                await self._watch_task
            except asyncio.CancelledError:
                pass

    async def _watch(self) -> None:
        import watchfiles

        async for changes in watchfiles.awatch(self.folder, recursive=False, debounce=200):
            names = {Path(p).name for _, p in changes}
            for name in sorted(names):
                if not _skip(name):
                    await self.refresh(self.folder / name)

    async def refresh(self, path: Path) -> None:
        """Re-read one file; tell the dispatcher when a workflow became runnable."""
        stem = path.stem if path.suffix == ".py" else path.name
        wf = await self._inspect(path) if path.exists() or path.is_symlink() else None
        old = self.workflows.get(stem)
        if wf is None:
            if old is not None and Path(old.path) == path:
                del self.workflows[stem]
                log.info("workflow %s removed", stem)
                if self.on_change is not None:
                    await self.on_change(old)
            return
        self.workflows[wf.name] = wf
        if old != wf:
            log.info("workflow %s %s%s", wf.name, "changed" if old else "added",
                     f" (error: {wf.error})" if wf.error else "")
            if self.on_change is not None:
                await self.on_change(wf)

    async def _inspect(self, path: Path) -> Workflow | None:
        name = path.stem if path.suffix == ".py" else path.name
        try:
            st = path.lstat()
        except FileNotFoundError:
            return None
        if stat.S_ISDIR(st.st_mode):
            return None
        kind = "python" if path.suffix == ".py" else "shell"
        error = self._unsafe(path)
        real = path.resolve()
        try:
            mtime = real.stat().st_mtime
        except OSError:
            mtime = 0.0
        if error is None and kind == "shell" and not os.access(real, os.X_OK):
            return None  # not executable and not Python: not a workflow (README, data files)
        from ys.errors import YsError
        from ys.store.base import check_workflow_name

        try:
            check_workflow_name(name)
        except YsError as exc:
            error = exc.message
        schedule = None
        if error is None and kind == "python":
            error, schedule = await check_python(real)
        elif error is None:
            schedule = shell_header(real)
        return Workflow(name, kind, str(path), error, mtime, schedule)

    def _unsafe(self, path: Path) -> str | None:
        """Why a script may not run, or None. Checked for the folder and the file itself."""
        folder_real = self.folder.resolve()
        real = path.resolve()
        if path.is_symlink() and folder_real not in real.parents:
            return f"{path.name} is a symlink that leads out of the workflows folder"
        for p in (folder_real, real):
            try:
                st = p.stat()
            except OSError as exc:
                return f"{p}: {exc.strerror}"
            if st.st_uid != self.uid:
                return f"{p} belongs to uid {st.st_uid}, not to you (uid {self.uid})"
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return f"{p} is writable by others; run chmod go-w {p}"
        return None


async def check_python(path: Path) -> tuple[str | None, dict[str, Any] | None]:
    """Import the script in a subprocess; returns (error, schedule declared by the decorator)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ys.worker", "--check", str(path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=str(path.parent),
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return "importing the script took longer than 30 s", None
    try:
        info = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return f"the script could not be checked: {tail[0]}", None
    return info.get("error"), info.get("schedule")


def shell_header(path: Path) -> dict[str, Any] | None:
    """A `# ys: schedule="..." tz=...` line near the top of a shell script, if any."""
    import shlex

    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = [f.readline() for _ in range(20)]
    except OSError:
        return None
    for line in head:
        s = line.strip()
        if s.startswith("# ys:"):
            fields: dict[str, Any] = {}
            for part in shlex.split(s[len("# ys:"):]):
                if "=" in part:
                    k, v = part.split("=", 1)
                    fields[k.strip()] = v
            return fields or None
    return None
