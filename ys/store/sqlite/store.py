"""`SqliteStore`: the SQL core's clients (ys/store/sql/store.py) over one SQLite file."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ys.store.sql.store import SqlStore
from ys.store.sqlite.core import DEFAULT_LEASE_SECONDS, Core

if TYPE_CHECKING:
    from ys.store.sqlite.backup import Backup


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

    def database_up(self) -> bool:
        """False while the file cannot be written (its disk read-only or failing): writes
        answer DATABASE_UNAVAILABLE until one goes through again."""
        return not self.core.writer.unwritable

    def backup(self, target: str) -> Backup:
        """A checked copy of the file at `target` (a new file), taken while the writer goes on
        (`ys.store.sqlite.backup`)."""
        import sqlite3

        from ys.store.sqlite.backup import backup

        # its own connection: VACUUM INTO reads one snapshot and writes only the new file
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        try:
            return backup(conn, target)
        finally:
            conn.close()


__all__ = ["SqliteStore"]
