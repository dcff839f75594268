"""The store: one interface (`base.Store`), one SQLite adapter, one pure `apply`."""

from __future__ import annotations

from typing import Any


def open_store(path: str, **kwargs: Any) -> Any:
    """The SQLite store at `path` (created and migrated when new)."""
    from ys.store.sqlite import SqliteStore

    return SqliteStore(path, **kwargs)
