"""Workflow scripts compiled once per version: a code cache keyed by the script's hash.

Every delivery is its own process, so without a cache each one compiles its script from
source. The compiled code is kept in `<data folder>/code/` (0700, files 0600: private, like
the database beside it), named by the SHA-256 of the interpreter's bytecode tag, the script's
path (code objects carry their file name, for tracebacks) and its bytes. A changed script is
another key, so it is compiled again; a cache file that does not load is compiled over.
The registry's load check (`python -m ys.worker --check`) fills the cache before the first
delivery needs it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType

from ys.paths import resolve  # preloaded by the fork server, with this module


def folder() -> Path:
    return resolve().data / "code"


def compiled(path: str) -> CodeType:
    """The code of the script at `path`, from the cache when it holds this version."""
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
        code = marshal.loads(where.read_bytes())
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
