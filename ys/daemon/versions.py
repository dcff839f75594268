"""Script versions on disk (docs/design.md, "Workflow options"): every version of a script the daemon ran or may run,
content-addressed and private under <data>/scripts/ (`<sha256>.py` for Python, `<sha256>` for
shell, 0700 folder), so that a pinned execution's delivery runs the version recorded at its
admission after its file was edited. `ys gc` prunes the copies no live execution needs."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

log = logging.getLogger("ys.versions")
SHORT = 12  # what `ys workflows` shows of a hash


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a regular file's bytes (opened without blocking: a FIFO is refused).
    Blocking: call it in a thread."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{os.fspath(path)} is not a regular file")
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def copy_path(folder: Path, sha256: str, kind: str) -> Path:
    return folder / (f"{sha256}.py" if kind == "python" else sha256)


def keep(folder: Path, source: str, sha256: str, kind: str) -> Path | None:
    """Copy `source` to its content address unless that copy exists (written whole, then
    renamed into place); None if the file no longer has that content (edited meanwhile)."""
    target = copy_path(folder, sha256, kind)
    if target.exists():
        return target
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out)
        if file_sha256(tmp) != sha256:
            return None
        os.chmod(tmp, 0o600 if kind == "python" else 0o700)
        os.replace(tmp, target)
        return target
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def prune(folder: Path, needed: set[str]) -> list[str]:
    """Remove the copies whose version is not in `needed`; returns the versions removed."""
    removed = []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    for name in names:
        sha = name.removesuffix(".py")
        if name.startswith(".") or sha in needed:
            continue
        try:
            os.unlink(folder / name)
            removed.append(sha)
        except OSError as exc:
            log.warning("could not remove %s: %s", folder / name, exc)
    return removed
