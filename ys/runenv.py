"""A workflow's run environment options (docs/workflows.md "Run environment"): `cwd`,
`env_file`, `nice`, `memory_max`. Parsed here for the registry's load check, applied here in
the worker's process before it runs anything (a spawned child's preexec, a forked spare).

The memory limit is the `memory.max` of a cgroup v2 scope of the worker's own where the
daemon's cgroup is delegated to it (ys.daemon.cgroups decides, `ys doctor` says which), else
RLIMIT_AS per process (a failed allocation: MemoryError in Python, an error or a death
elsewhere).
"""

from __future__ import annotations

import os
import re
import resource

MEMORY_LIMIT_ERROR = "MemoryLimitExceeded"
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_size(v: object) -> int:
    """`512M`, `1G`, `65536` (bytes; K, M, G, T are powers of 1024, as systemd's MemoryMax=);
    ValueError otherwise."""
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
        return v
    m = _SIZE.match(v) if isinstance(v, str) else None
    if m is None or int(m.group(1)) == 0:
        raise ValueError(f"bad memory_max: {v!r} must be a size such as 512M or 2G")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def parse_nice(v: object) -> int:
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 19:
        raise ValueError(f"bad nice: {v!r} must be a whole number from 0 to 19")
    return v


def check_cwd(v: object) -> str:
    if not isinstance(v, str) or not os.path.isabs(v) or not os.path.isdir(v):
        raise ValueError(f"bad cwd: {v!r} must be the absolute path of an existing folder")
    return v


def check_env_file(v: object) -> str:
    if not isinstance(v, str) or not os.path.isabs(v):
        raise ValueError(f"bad env_file: {v!r} must be an absolute path")
    try:
        read_env_file(v)
    except OSError as exc:
        raise ValueError(f"bad env_file: {v}: {exc.strerror or exc}") from None
    return v


def read_env_file(path: str) -> dict[str, str]:
    """systemd's EnvironmentFile= syntax, its common part: `NAME=value` lines, blank lines and
    lines starting with # or ; skipped, an optional `export ` before the name, a value in
    single or double quotes taken without them (no escapes, no $ expansion, no line
    continuations). A line without `=` or with a bad name is skipped, as systemd does."""
    env: dict[str, str] = {}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for raw in f:
            line = raw.strip()
            if not line or line[0] in "#;" or "=" not in line:
                continue
            name, value = line.split("=", 1)
            name = name.strip().removeprefix("export ").strip()
            if not _NAME.match(name):
                continue
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[name] = value
    return env


def apply_limits(nice: int | None, memory_max: int | None, cgroup: str | None = None) -> None:
    """In the worker's process, before it runs anything: its nice value, then its memory
    limit: the worker moves itself into `cgroup` (its cgroup v2 scope, ys.daemon.cgroups),
    else, or when that move is refused, its RLIMIT_AS (inherited by everything it starts)."""
    if nice:
        os.nice(nice)
    if cgroup is not None:
        try:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            return
        except OSError:
            pass  # the scope's memory.max cannot hold it: RLIMIT_AS does
    if memory_max is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_max, memory_max))


def memory_limited() -> bool:
    """Whether this process runs under a memory_max's RLIMIT_AS."""
    return resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY
