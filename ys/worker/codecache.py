"""Workflow scripts compiled once per version: a code cache keyed by the script's hash.

Every delivery is its own process, so without a cache each one compiles its script from
source. The compiled code is kept in `<data folder>/code/` (0700, files 0600: private, like
the database beside it), named by the SHA-256 of the interpreter's bytecode tag, the script's
path (code objects carry their file name, for tracebacks) and its bytes. A changed script is
another key, so it is compiled again; a cache file that does not load is compiled over.
The registry's load check (`python -m ys.worker --check`) fills the cache before the first
delivery needs it. A file in use has its modification time brought forward (at most once a
day), so `ys gc` (and the daemon's daily gc) prunes the versions no delivery loaded within the
retention period; one pruned too early only costs a compile.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import sys
import time
from pathlib import Path
from types import CodeType

from ys.paths import resolve  # preloaded by the fork server, with this module

TOUCH_AFTER = 86400.0  # a loaded file older than this has its time brought forward
STRAY_AFTER = 3600.0  # a half-written file (a crash mid-store) older than this is litter


_PINNED: Path | None = None


def folder() -> Path:
    """`<data>/code` (as the fork server resolved it once, in its workers)."""
    return _PINNED if _PINNED is not None else resolve().data / "code"


def pin_folder() -> None:
    """Resolve the folder once for this process and its forks (the fork server's: its
    workers' data folder is the daemon's, whatever they do to their environment)."""
    global _PINNED
    _PINNED = resolve().data / "code"


def _load(where: Path) -> bytes:
    with open(where, "rb") as f:
        mtime = os.fstat(f.fileno()).st_mtime
        data = f.read()
    if time.time() - mtime > TOUCH_AFTER:  # in use: keep it from the prune
        try:
            os.utime(where)
        except OSError:
            pass
    return data


def prune(where: Path, older_than: float, now: float | None = None) -> list[str]:
    """Remove the cached versions no delivery loaded for `older_than` seconds, and the
    litter of interrupted writes; returns the names removed."""
    t = time.time() if now is None else now
    removed = []
    try:
        entries = list(os.scandir(where))
    except FileNotFoundError:
        return []
    for e in entries:
        stray = e.name.startswith(".")
        if not (stray or e.name.endswith(".code")):
            continue
        try:
            age = t - e.stat(follow_symlinks=False).st_mtime
            if age > (STRAY_AFTER if stray else older_than):
                os.unlink(e.path)
                removed.append(e.name)
        except OSError:
            pass  # gone meanwhile, or not ours to remove: nothing to do
    return removed


def compiled(path: str, source: bytes | None = None) -> CodeType:
    """The code of the script at `path` (whose bytes are `source` when the caller read
    them), from the cache when it holds this version."""
    if source is None:
        with open(path, "rb") as f:
            source = f.read()
    key = hashlib.sha256(
        b"\0".join(
            [
                importlib.util.MAGIC_NUMBER,
                sys.implementation.cache_tag.encode(),
                os.fsencode(path),
                source,
            ]
        )
    ).hexdigest()
    where = folder() / f"{key}.code"
    try:
        code = marshal.loads(_load(where))
        if isinstance(code, CodeType):
            return code
    except (OSError, ValueError, EOFError, TypeError):
        pass  # not cached yet, or unreadable: compiled below
    code = compile(source, path, "exec", dont_inherit=True)
    _store(where, marshal.dumps(code))
    return code


def _store(where: Path, data: bytes) -> None:
    """Write atomically (a reader sees the whole file or none); a cache that cannot be
    written only costs the next delivery a compile."""
    tmp = where.with_name(f".{where.name}.{os.getpid()}")
    try:
        where.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(data)
        os.replace(tmp, where)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
