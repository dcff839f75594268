"""SQLite's dialect and connection class: one writer holds the whole file (`BEGIN IMMEDIATE`),
so no statement needs a row lock and a lease needs no holder; `?` is sqlite3's placeholder."""

from __future__ import annotations

import sqlite3

from ys.store.sql.dialect import Dialect


class SqliteDialect(Dialect):
    name = "sqlite"


SQLITE = SqliteDialect()


class Connection(sqlite3.Connection):
    """A sqlite3 connection that carries its dialect, as every connection the core's
    transaction bodies get does."""

    dialect: Dialect = SQLITE
