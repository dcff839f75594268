"""memory_max through cgroup v2 where the box allows it (docs/workflows.md "Run environment").

The daemon's own cgroup is its to divide when the unified hierarchy is mounted (the root's
`cgroup.controllers` exists), that cgroup offers the `memory` controller, its directory and its
`cgroup.procs` and `cgroup.subtree_control` are writable by this user (delegated, as systemd's
`Delegate=yes` does) and no other process shares it (a cgroup with processes of its own cannot
give its children a controller). Then the daemon moves itself into a leaf `ys-daemon`, turns
`memory` on for the children, and each delivery with a memory_max gets a cgroup of its own
beside that leaf: `memory.max` set, `memory.oom.group` 1 (past it the kernel kills the whole
delivery), the worker moved in before it runs anything (ys.runenv.apply_limits), its
`memory.events` oom_kill read once it ends (MemoryLimitExceeded), the cgroup removed.
Anywhere else each worker process gets RLIMIT_AS. `ys doctor` says which, and why.

The root is injectable: the tests lay out a folder as cgroupfs is.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

log = logging.getLogger("ys.cgroups")

ROOT = Path("/sys/fs/cgroup")
LEAF = "ys-daemon"  # where the daemon (and its fork server) move to free their cgroup
PREFIX = "ys-worker-"  # then <daemon pid>-<n>: one per delivery with a memory_max
CGROUP_V2 = "cgroup v2"
RLIMIT_AS = "RLIMIT_AS"


class MemoryLimitJson(TypedDict):
    """What limits a worker's memory, as `GET /v1/version` answers it (docs/API.md)."""

    mechanism: str
    detail: str


@dataclass(frozen=True)
class Choice:
    """What limits a worker's memory here: the mechanism, why, and the cgroup divided."""

    mechanism: str  # CGROUP_V2 | RLIMIT_AS
    detail: str
    home: Path | None = None

    def to_json(self) -> MemoryLimitJson:
        return {"mechanism": self.mechanism, "detail": self.detail}


def own_cgroup(pid: int | str = "self") -> str | None:
    """A process's cgroup v2 path (its `0::` line in /proc/PID/cgroup), or None."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _rlimit(why: str) -> Choice:
    return Choice(RLIMIT_AS, f"RLIMIT_AS per process: {why}")


def probe(root: Path, own: str | None, pid: int) -> Choice:
    """The choice for process `pid` in cgroup `own`, read only (nothing written)."""
    if own is None or not (root / "cgroup.controllers").is_file():
        return _rlimit(f"no cgroup v2 hierarchy at {root} (cgroup v1, or none)")
    home = root / own.lstrip("/")
    if home.name == LEAF:  # a daemon that has moved already: it divides its leaf's parent
        home = home.parent
    if "memory" not in _read(home / "cgroup.controllers").split():
        return _rlimit(f"the memory controller is not delegated to {home}")
    writable = (home, home / "cgroup.procs", home / "cgroup.subtree_control")
    if not all(os.access(p, os.W_OK) for p in writable):
        return _rlimit(f"{home} is not delegated to this user (not writable)")
    others = sorted({int(p) for p in _read(home / "cgroup.procs").split() if p.isdigit()} - {pid})
    if home != root and others:
        return _rlimit(
            f"{home} holds other processes too (pid {others[0]}), so it cannot give its "
            "children the memory controller; a daemon run as a service "
            "(`ys daemon install`) has a cgroup of its own"
        )
    return Choice(CGROUP_V2, f"cgroup v2: a cgroup per worker under {home}", home)


@dataclass
class MemoryCgroups:
    """The daemon's choice, and the worker cgroups it makes and removes."""

    choice: Choice
    rmdir: Callable[[Path], None] = os.rmdir  # the tests emulate cgroupfs's rmdir
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _left: set[Path] = field(default_factory=set)

    @classmethod
    def set_up(
        cls,
        root: Path | None = None,
        own: str | None = None,
        pid: int | None = None,
        rmdir: Callable[[Path], None] = os.rmdir,
    ) -> MemoryCgroups:
        """Decide, and where cgroup v2 is chosen move this process into its leaf and turn
        `memory` on for the children. Call it before any child process starts (a child left
        in the cgroup would keep its controllers from its children)."""
        pid = os.getpid() if pid is None else pid
        choice = probe(ROOT if root is None else root, own or own_cgroup(), pid)
        home = choice.home
        if home is None:
            return cls(choice, rmdir)
        try:
            leaf = home / LEAF
            leaf.mkdir(exist_ok=True)
            _write(leaf / "cgroup.procs", str(pid))
            if "memory" not in _read(home / "cgroup.subtree_control").split():
                _write(home / "cgroup.subtree_control", "+memory")
        except OSError as exc:
            return cls(_rlimit(f"{home} refused its memory controller to children: {exc}"), rmdir)
        made = cls(choice, rmdir)
        made._sweep(home)
        return made

    @property
    def mechanism(self) -> str:
        return self.choice.mechanism

    def open(self, memory_max: int | None) -> Path | None:
        """A new cgroup limited to `memory_max` for one worker, or None (RLIMIT_AS then)."""
        home = self.choice.home
        if home is None or memory_max is None:
            return None
        scope = home / f"{PREFIX}{os.getpid()}-{next(self._seq)}"
        try:
            scope.mkdir()
            _write(scope / "memory.max", str(memory_max))
        except OSError as exc:
            log.warning("no cgroup for a worker (RLIMIT_AS instead): %s", exc)
            self._remove(scope)
            return None
        with contextlib.suppress(OSError):  # before Linux 4.19 only its process is killed
            _write(scope / "memory.oom.group", "1")
        return scope

    def close(self, scope: Path) -> bool:
        """After its worker ended: whether the kernel killed it past its memory.max; then
        the cgroup is removed (what is left in it killed first)."""
        killed = oom_kills(scope) > 0
        self._remove(scope)
        for left in list(self._left):
            self._remove(left)
        return killed

    def _remove(self, scope: Path) -> None:
        try:
            self.rmdir(scope)
        except FileNotFoundError:
            pass
        except OSError:  # processes still in it: killed, and removed at a later close
            with contextlib.suppress(OSError):
                _write(scope / "cgroup.kill", "1")
            self._left.add(scope)
            return
        self._left.discard(scope)

    def _sweep(self, home: Path) -> None:
        """Remove the worker cgroups that daemons since gone left behind (a crash)."""
        for scope in home.glob(f"{PREFIX}*-*"):
            owner = scope.name[len(PREFIX) :].split("-", 1)[0]
            if owner.isdigit() and not _alive(int(owner)):
                with contextlib.suppress(OSError):
                    self.rmdir(scope)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def oom_kills(scope: Path) -> int:
    """The `oom_kill` count of a cgroup's memory.events (0 when unreadable)."""
    for line in _read(scope / "memory.events").splitlines():
        key, _, n = line.partition(" ")
        if key == "oom_kill" and n.strip().isdigit():
            return int(n)
    return 0
