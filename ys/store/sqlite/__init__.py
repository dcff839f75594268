"""The SQLite adapter: `SqliteStore`, the store's clients over one SQLite file (WAL,
synchronous=FULL). Everything in this package is private to `ys.store`: the rest of ys opens a
store with `ys.store.open_store` and types it against `ys.store.protocols`."""

from __future__ import annotations

from ys.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
