"""What every adapter's `migrate` does with the schema version it reads (each adapter keeps its
own migrations and transactions: ys/store/sqlite/schema.py, ys/store/postgres/schema.py)."""

from __future__ import annotations

from ys.errors import InvalidArgument


def newer_database(version: int, known: int) -> InvalidArgument:
    """A database a newer ys wrote: this one must not write it (its tables mean more now)."""
    return InvalidArgument(
        "INVALID_ARGUMENT",
        f"the database was written by a newer ys (schema {version}; this ys knows up to "
        f"{known}); upgrade ys to open it",
    )


def due(version: int, known: int) -> bool:
    """Whether migration `version` + 1 is still to apply to a database at `version`, of the
    `known` migrations this ys has; a database past them is refused unchanged."""
    if version > known:
        raise newer_database(version, known)
    return version < known
