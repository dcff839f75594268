"""`SqliteStore`: the SQL core's clients (ys/store/sql/store.py) over one SQLite file."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ys.store.sql.store import SqlStore
from ys.store.sqlite.core import DEFAULT_LEASE_SECONDS, Core


class SqliteStore(SqlStore):
    """One SQLite file, every client of `ys.store.protocols.Store` over it. Thread-safe:
    writes go through one writer, reads use per-thread connections (WAL lets them run beside
    the writer)."""

    shared = False  # one daemon owns the file (its lock says so)
    core: Core

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        group_commit: bool = False,
        clock: Callable[[], float] = time.time,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        read_only: bool = False,
    ) -> None:
        core = Core(
            path,
            group_commit=group_commit,
            clock=clock,
            lease_seconds=lease_seconds,
            read_only=read_only,
        )
        super().__init__(core)
        self.path = core.path


__all__ = ["SqliteStore"]
