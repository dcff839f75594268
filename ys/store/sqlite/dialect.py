"""SQLite's dialect and connection class: one writer holds the whole file (`BEGIN IMMEDIATE`),
so no statement needs a row lock and a lease needs no holder; `?` is sqlite3's placeholder."""

from __future__ import annotations

import sqlite3

from ys.store.sql.dialect import Dialect


class SqliteDialect(Dialect):
    name = "sqlite"

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
