"""The registry: the workflows folder, watched with watchfiles and re-checked periodically.

A workflow's name is its file name without the extension, for every kind (`backup.sh` is
`backup`); two files with one name are both listed with an error and neither runs. A `.py`
file is a Python workflow, checked by importing it in a throw-away subprocess (never in the
daemon); any other executable regular file is a shell workflow, and one that starts with a
shebang but lacks its execute bit is listed with that error (its executions wait). Scripts
must belong to the user and not be writable by others; symlinks may not lead out of the
folder.

Whatever is wrong with one script (a syntax error, an unreadable header, a bad schedule) is that
script's error, listed by `ys workflows`; nothing in one script stops the registry. The watcher
may miss a chmod (of the folder above all), so every few seconds each file's signature (mode,
owner, size, mtime, and the folder's mode and owner) is compared with the one last inspected.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ys.daemon.outage import Outage
from ys.daemon.scripts import (
    DeclaredSchedule,
    Signature,
    WorkflowOptions,
    check_python,
    options_error,
    parse_options,
    read_head,
    schedule_error,
    shell_header,
    signature,
    split_options,
)
from ys.errors import DaemonUnavailable
from ys.store.protocols import ConcurrencyLimit

log = logging.getLogger("ys.registry")
RESCAN_SECONDS = 5.0  # how often the folder is re-checked for what the watcher did not report
WATCH_STEP_MS = 1000  # how often the watcher's thread wakes to look for changes (ms)


@dataclass(frozen=True)
class Workflow:
    name: str
    kind: str  # python | shell
    path: str
    error: str | None = None
    mtime: float = 0.0
    schedule: DeclaredSchedule | None = None
    on_failure: str | None = (
        None  # the workflow its failures admit (docs/design.md, "Workflow options")
    )
    pin: bool = False  # deliveries run the version recorded at admission
    sha256: str | None = None  # the script's content now (None: not readable, or broken)
    folder: str | None = None  # where a delivery runs (a pinned copy runs from the folder)
    options: WorkflowOptions = WorkflowOptions()  # timeout, max_attempts, concurrency, key

    @property
    def timeout(self) -> float | None:
        return self.options.timeout

    @property
    def max_attempts(self) -> int:
        return self.options.max_attempts

    @property
    def limit(self) -> ConcurrencyLimit | None:
        """`concurrency=N` (`key=FIELD`): what each claim enforces (the store's claim_due)."""
        n = self.options.concurrency
        return None if n is None else ConcurrencyLimit(n, self.options.key)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "path": self.path,
            "error": self.error,
            "schedule": None if self.schedule is None else self.schedule.to_json(),
            "on_failure": self.on_failure,
            "pin": self.pin,
            "sha256": self.sha256,
            "timeout": self.options.timeout,
            "max_attempts": self.options.max_attempts,
            "concurrency": self.options.concurrency,
            "key": self.options.key,
            "cwd": self.options.cwd,
            "env_file": self.options.env_file,
            "nice": self.options.nice,
            "memory_max": self.options.memory_max,
        }


def workflow_name(file_name: str) -> str:
    """The file name without its extension (`backup.sh` -> `backup`; `backup` stays)."""
    return Path(file_name).stem


def missing_handler(
    name: str, own: str | None, default: str | None, known: Callable[[str], bool]
) -> str | None:
    """Why the failure handler of workflow `name` (its own `on_failure`, else the folder-wide
    one) cannot run: it names no workflow in the folder. Its failures still admit their
    handler executions, which wait for that script (docs/design.md, "Workflow options")."""
    handler = own or default
    if handler is None or handler == name or known(handler):
        return None
    where = "its on_failure" if own else "the folder-wide on_failure (config.toml)"
    return (
        f"on_failure names {handler}, which is not a workflow in the folder ({where}); "
        f"each failure admits a {handler} execution that waits for it"
    )


def _shebang(path: Path) -> bool:
    """Whether a regular file starts with `#!` (blocking: call it in a thread)."""
    try:
        return read_head(path, 1)[0].startswith("#!")
    except (OSError, IndexError):
        return False


def _skip(name: str) -> bool:
    return name.startswith((".", "_", "#")) or name.endswith(("~", ".swp", ".tmp", ".pyc"))


def _build(files: dict[str, Workflow]) -> tuple[dict[str, Workflow], list[Workflow]]:
    """(workflow name -> what runs, the listing) of these files: two files with one name are
    both broken."""
    groups: dict[str, list[Workflow]] = {}
    for wf in files.values():
        groups.setdefault(wf.name, []).append(wf)
    workflows: dict[str, Workflow] = {}
    listing: list[Workflow] = []
    for name in sorted(groups):
        group = sorted(groups[name], key=lambda w: w.path)
        if len(group) > 1:
            names = ", ".join(Path(w.path).name for w in group)
            why = (
                f"{len(group)} files are named {name} ({names}); a workflow's name is its "
                "file name without the extension: rename or remove all but one"
            )
            group = [replace(w, error=why) for w in group]
        workflows[name] = group[0]
        listing += group
    return workflows, listing


class Registry:
    def __init__(
        self,
        folder: Path,
        on_change: Callable[[Workflow], Awaitable[None]] | None = None,
        rescan_seconds: float = RESCAN_SECONDS,
    ) -> None:
        self.folder = folder
        self.on_change = on_change
        self.rescan_seconds = rescan_seconds
        self.uid = os.getuid()
        self.files: dict[str, Workflow] = {}  # file name -> the workflow it is
        self.workflows: dict[str, Workflow] = {}  # workflow name -> what runs (or why not)
        # the limits of the workflows that declare one in this folder's copies (the store's
        # claims apply the recorded ones; this says which not to claim at admission)
        self.limits: dict[str, ConcurrencyLimit] = {}
        self._listing: list[Workflow] = []  # every file, duplicates with their error
        self._seen: dict[str, Signature] = {}  # file name -> its signature when inspected
        self._lock = asyncio.Lock()  # one refresh at a time: changes apply in order
        self._tasks: list[asyncio.Task[None]] = []
        # Told of a runnable script's version before the registry lists it, so that the store
        # records it first: a delivery claimed once the new version shows runs that version.
        self.on_version: Callable[[Workflow], Awaitable[None]] | None = None
        # A change the daemon could not record (its database away: `on_version` or `on_change`
        # raised DaemonUnavailable) is said once and recorded by a later rescan (docs/design.md,
        # "On PostgreSQL"): the file stays unseen, or its workflow waits in `_untold`.
        self.outage = Outage(
            log, "recording a workflow change", "workflow changes are recorded again"
        )
        self._untold: dict[str, Workflow] = {}  # workflow name -> the change `on_change` missed

    def get(self, name: str) -> Workflow | None:
        return self._named(name)

    def _named(self, name: str) -> Workflow | None:
        """The workflow `name`; also by its file name (`backup.sh`), which is how ys named a
        shell workflow before names lost their extension: executions and schedules stored
        then still find their script."""
        wf = self.workflows.get(name)
        if wf is None and "." in name:
            wf = self.workflows.get(name.rsplit(".", 1)[0])
            if wf is not None and Path(wf.path).name != name:
                wf = None
        return wf

    def listing(self) -> list[Workflow]:
        """Every script in the folder, by name then path (both of two files with one name)."""
        return list(self._listing)

    async def load(self) -> None:
        """Scan the whole folder once (the daemon answers only after this)."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        found = await asyncio.to_thread(self._candidates)
        names = sorted(found)
        inspected = await asyncio.gather(*(self._inspect(self.folder / n) for n in names))
        for n, wf in zip(names, inspected, strict=True):
            self._seen[n] = found[n]
            if wf is not None:
                self.files[n] = wf
        self._rebuild()

    def start_watching(self) -> None:
        self._tasks = [
            asyncio.create_task(self._watch(), name="registry-watch"),
            asyncio.create_task(self._poll(), name="registry-rescan"),
        ]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def current(self, name: str) -> Workflow | None:
        """The workflow as it is now: a broken or unknown one is re-checked first (its file
        may have been fixed, or its folder chmod-ed, without the watcher saying so)."""
        wf = self._named(name)
        if wf is not None and wf.error is None:
            return wf
        if name and "/" not in name and name not in (".", ".."):
            await self.rescan(name)
        return self._named(name)

    def waiting_for(self, name: str, detail: str = "") -> str:
        """What an execution that waits for workflow `name`'s script waits on, as `ys ps`
        shows it: the script as it is now, else as its last delivery found it (`detail`)."""
        wf = self._named(name)
        if wf is None:
            return "script missing"
        if wf.error:
            return f"script broken ({wf.error})"
        return "script broken" if "broken" in detail else "script missing"  # fixed: woken soon

    async def fresh(self, name: str) -> None:
        """Re-read the files of workflow `name` changed since they were inspected (an edit
        the watcher has not reported yet, as it lags by a second or so), so that an admission
        records the script as it is at that moment. A few stat calls when nothing changed."""
        wf = self._named(name)
        if wf is None:
            return
        for file_name in [n for n, w in self.files.items() if w.name == wf.name]:
            path = self.folder / file_name
            if signature(self.folder, path) != self._seen.get(file_name):
                await self.refresh(path, only_if_changed=True)

    def set_error(self, name: str, error: str) -> None:
        """Mark a workflow broken after the fact (its schedule was refused by the store)."""
        for file_name, wf in list(self.files.items()):
            if wf.name == name and wf.error is None:
                self.files[file_name] = replace(wf, error=error)
        self._rebuild()

    # -- watching -------------------------------------------------------------------------

    async def _watch(self) -> None:
        import watchfiles

        while True:
            try:
                # inotify tells the watcher's thread at once; `step` is how often that thread
                # wakes to look (watchfiles' default, 50 ms, is 20 wake-ups a second of an idle
                # daemon). A change is still seen within about a second, and a trigger of a
                # name not seen yet rescans the folder first (`current`). No rust timeout:
                # each one would be one more wake-up and thread hand-off for nothing.
                async for changes in watchfiles.awatch(
                    self.folder, recursive=False, debounce=200, step=WATCH_STEP_MS, rust_timeout=0
                ):
                    await self._changed({Path(p) for _, p in changes})
            except asyncio.CancelledError:
                raise
            except Exception:  # a vanished folder, an inotify limit: rescans go on meanwhile
                log.exception("watching %s failed; retrying", self.folder)
            await asyncio.sleep(self.rescan_seconds)

    async def _changed(self, paths: set[Path]) -> None:
        if any(p == self.folder for p in paths):  # the folder itself: its mode, say
            await self.rescan()
        for name in sorted({p.name for p in paths if p != self.folder}):
            if not _skip(name):
                try:
                    await self.refresh(self.folder / name)
                except DaemonUnavailable as exc:  # recorded by the next rescan
                    self.outage.lost(exc)
                except Exception:
                    log.exception("re-reading %s failed", name)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.rescan_seconds)
            try:
                await self.rescan()
            except DaemonUnavailable as exc:  # tried again at the next rescan
                self.outage.lost(exc)
                continue
            except Exception:
                log.exception("re-checking %s failed", self.folder)
            self.outage.back()

    async def rescan(self, name: str | None = None) -> None:
        """Re-inspect every file (or every file of workflow `name`) whose signature changed
        since it was inspected; new and removed files included. A change the daemon could not
        record while its database was away is recorded first."""
        await self._tell_untold()
        # On the loop, not in a thread: a few stat calls of a small local folder take less
        # than the two thread hand-offs (three wake-ups) each periodic rescan would cost.
        now = self._candidates()
        names = set(now) | set(self._seen)
        if name is not None:
            names = {n for n in names if workflow_name(n) == name or n == name}
        for n in sorted(names):
            if now.get(n) != self._seen.get(n):
                await self.refresh(self.folder / n, only_if_changed=True)

    def _candidates(self) -> dict[str, Signature]:
        """Each file name in the folder that may be a script, with its signature (blocking)."""
        out: dict[str, Signature] = {}
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return out
        for e in entries:
            if not _skip(e.name):
                sig = signature(self.folder, Path(e.path))
                if sig is not None:
                    out[e.name] = sig
        return out

    # -- one file -------------------------------------------------------------------------

    async def refresh(self, path: Path, only_if_changed: bool = False) -> None:
        """Re-read one file; tell the daemon when its workflow changed (became runnable,
        broken, or gone)."""
        async with self._lock:
            sig = await asyncio.to_thread(signature, self.folder, path)
            if only_if_changed and sig == self._seen.get(path.name):
                return
            wf = await self._inspect(path) if sig is not None else None
            name = workflow_name(path.name)
            files = dict(self.files)
            if wf is None:
                files.pop(path.name, None)
            else:
                files[path.name] = wf
            # What runs under this name once the change applies: this file, or another one
            # (the file removed was one of two with one name); its version is recorded first.
            runs = _build(files)[0].get(name)
            if runs is not None and runs.error is None and self.on_version is not None:
                await self.on_version(runs)
            old = self.workflows.get(name)
            if sig is None:
                self._seen.pop(path.name, None)
            else:
                self._seen[path.name] = sig
            if wf is None:
                self.files.pop(path.name, None)
            else:
                self.files[path.name] = wf
            self._rebuild()
            new = self.workflows.get(name)
            if new == old:
                return
            if new is None:
                log.info("workflow %s removed", name)
            else:
                log.info(
                    "workflow %s %s%s",
                    name,
                    "changed" if old else "added",
                    f" (error: {new.error})" if new.error else "",
                )
            self._untold.pop(name, None)  # this change says all that one would have
            if self.on_change is not None:
                try:
                    await self.on_change(new or old)  # type: ignore[arg-type]
                except DaemonUnavailable:
                    self._untold[name] = new or old  # type: ignore[assignment]
                    raise

    async def _tell_untold(self) -> None:
        """Tell the daemon the changes it could not record (`_untold`), oldest first."""
        while self._untold and self.on_change is not None:
            async with self._lock:
                if not self._untold:
                    return
                name, wf = next(iter(self._untold.items()))
                await self.on_change(wf)
                self._untold.pop(name, None)

    def _rebuild(self) -> None:
        """`workflows` and the listing from `files`: two files with one name are both broken."""
        workflows, listing = _build(self.files)
        self.workflows, self._listing = workflows, listing
        self.limits = {
            n: wf.limit for n, wf in workflows.items() if wf.limit is not None and wf.error is None
        }

    async def _inspect(self, path: Path) -> Workflow | None:
        """What one file is: a workflow (with its error, if any) or None (not a script)."""
        name = workflow_name(path.name)
        kind = "python" if path.suffix == ".py" else "shell"
        try:
            return await self._inspect_file(path, name, kind)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # anything one script does is that script's error
            log.exception("inspecting %s failed", path)
            return Workflow(name, kind, str(path), f"the script could not be loaded: {exc}")

    async def _inspect_file(self, path: Path, name: str, kind: str) -> Workflow | None:
        try:
            st = path.lstat()
        except FileNotFoundError:
            return None
        if stat.S_ISDIR(st.st_mode):
            return None
        error = self._unsafe(path)
        real = path.resolve()
        try:
            target: os.stat_result | None = real.stat()
        except OSError:
            target = None  # a dangling symlink: _unsafe said why
        if target is not None and not stat.S_ISREG(target.st_mode):
            return None  # FIFOs, sockets, devices: never scripts, never opened
        mtime = target.st_mtime if target is not None else 0.0
        if kind == "shell" and target is not None and not os.access(real, os.X_OK):
            # Not executable and not Python: a script that lacks its execute bit when it starts
            # with a shebang (listed, its executions wait), else not a workflow (README, notes,
            # data files), even when it is unsafe (a group-writable backup.md must not shadow
            # backup.py).
            if not await asyncio.to_thread(_shebang, real):
                return None
            error = error or f"not executable: chmod +x {path}"
        from ys.contract import check_workflow_name
        from ys.errors import YsError

        try:
            check_workflow_name(name)
        except YsError as exc:
            error = exc.message
        declared = None
        if error is None:
            error, declared = await (check_python(real) if kind == "python" else shell_header(real))
        schedule, options = split_options(declared)
        if error is None:
            error = schedule_error(name, schedule) or options_error(options)
        parsed = parse_options(options) if error is None else WorkflowOptions()
        sha = None
        if error is None:
            from ys.daemon.versions import file_sha256

            try:
                sha = await asyncio.to_thread(file_sha256, real)
            except OSError as exc:
                error = f"the script could not be read: {exc}"
        return Workflow(
            name,
            kind,
            str(path),
            error,
            mtime,
            schedule,
            on_failure=parsed.on_failure,
            pin=parsed.pin,
            sha256=sha,
            options=parsed,
        )

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
