"""SQLite's dialect and connection class: one writer holds the whole file (`BEGIN IMMEDIATE`),
so no statement needs a row lock and a lease needs no holder; `?` is sqlite3's placeholder."""

from __future__ import annotations

import sqlite3
from typing import Any

from ys.store.sql.dialect import Dialect
from ys.store.sql.lists import prefix_end

# Past this many executions under one ID prefix, walking the newest-first index and skipping
# the others is quicker than sorting every match.
PREFIX_SORT_MAX = 2000


class SqliteDialect(Dialect):
    name = "sqlite"

    def indexed_by(self, index: str) -> str:
        # SQLite's planner picks a worse index for these queries without the hint
        return f" INDEXED BY {index}"

    def prefix_index(self, c: Any, prefix: str, narrowed: bool) -> str:
        # Few matches: read them by key and sort them. Many (and no status to narrow them):
        # walk the newest-first index and skip the others.
        few = (
            c.execute(
                "SELECT COUNT(*) FROM (SELECT 1 FROM executions WHERE execution_id >= ? AND "
                "execution_id < ? LIMIT ?)",
                (prefix, prefix_end(prefix), PREFIX_SORT_MAX),
            ).fetchone()[0]
            < PREFIX_SORT_MAX
        )
        if few:
            return " INDEXED BY sqlite_autoindex_executions_1"
        return "" if narrowed else " INDEXED BY executions_admitted"

    def starts_with(self, column: str, prefix: str) -> tuple[str, str]:
        # GLOB, not LIKE: LIKE ignores ASCII case, so "approve/" would also list "Approve/...".
        # Each GLOB wildcard in the prefix is escaped as a one-character class ("[*]").
        escaped = "".join(f"[{ch}]" if ch in "*?[" else ch for ch in prefix)
        return f"{column} GLOB ?", escaped + "*"


SQLITE = SqliteDialect()


class Connection(sqlite3.Connection):
    """A sqlite3 connection that carries its dialect, as every connection the core's
    transaction bodies get does."""

    dialect: Dialect = SQLITE
