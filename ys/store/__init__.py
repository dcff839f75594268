"""The store: the database adapter behind the protocols of `ys.store.protocols`.

`open_store` is the one way in from the rest of ys (the daemon, `ys.testing`, `ys doctor`);
they type what it returns as `protocols.Store` and never see SQL. The setting is a file path
(the SQLite adapter, `ys.store.sqlite`) or a postgresql:// URL (`ys.store.postgres`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any

from ys.errors import InvalidArgument
from ys.store.protocols import ExportLine, PostgresReport, Store

if TYPE_CHECKING:
    from ys.store.sqlite.backup import BackupFile, Restored


def open_store(
    database: str | os.PathLike[str],
    *,
    group_commit: bool = False,
    clock: Callable[[], float] | None = None,
    lease_seconds: float = 30.0,
    read_only: bool = False,
    daemon_id: str | None = None,
) -> Store:
    """The store a setting names: a file path opens (and, unless read_only, creates and
    migrates) a SQLite database. `group_commit` shares commits between concurrent writes (the
    daemon); `read_only` never writes (`ys doctor`). `clock` (tests) replaces the store's: by
    default this box's, or on PostgreSQL the server's (docs/design.md, "On PostgreSQL")."""
    setting = os.fspath(database)
    if "://" in setting:
        scheme = setting.split("://", 1)[0]
        if scheme in ("postgres", "postgresql"):
            from ys.store.postgres import PostgresStore

            return PostgresStore(
                setting,
                group_commit=group_commit,
                clock=clock,
                lease_seconds=lease_seconds,
                read_only=read_only,
                daemon_id=daemon_id,
            )
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"database {scheme}://... is not supported; give a file path or a postgresql:// URL",
        )
    from ys.store.sqlite import SqliteStore

    return SqliteStore(
        setting,
        group_commit=group_commit,
        clock=clock or time.time,
        lease_seconds=lease_seconds,
        read_only=read_only,
    )


def is_postgres(database: str | os.PathLike[str] | None) -> bool:
    """Whether a database setting names a PostgreSQL server."""
    if database is None or "://" not in os.fspath(database):
        return False  # a file path (even a file named "postgres")
    return os.fspath(database).split("://", 1)[0] in ("postgres", "postgresql")


def require_driver(database: str | os.PathLike[str] | None) -> None:
    """Refuse a PostgreSQL setting at once, saying what to install, when its driver is
    missing (a daemon checks before it takes its lock). Nothing for a file."""
    if is_postgres(database):
        from ys.store.postgres import driver

        driver()


def inspect_postgres(url: str) -> PostgresReport:
    """What `ys doctor` reports of a PostgreSQL database, read without writing (server and
    schema versions, row counts, records that differ from their history). ImportError when
    the adapter's driver is not installed."""
    from ys.store.postgres import inspect

    return inspect(url)


def check_backup(path: str | os.PathLike[str]) -> BackupFile:
    """What a SQLite backup file holds, if this ys can open it; InvalidArgument saying what is wrong otherwise (`ys restore`)."""
    from ys.store.sqlite.backup import check_file

    return check_file(path)


def restore_backup(source: str | os.PathLike[str], database: str | os.PathLike[str]) -> Restored:
    """Put the SQLite backup `source` in place of the file `database` (no daemon may hold it),
    the current file kept aside (`ys restore`)."""
    from ys.store.sqlite.backup import restore

    return restore(source, database)


def write_export(store: Store, out: IO[str], **filters: Any) -> dict[str, int]:
    """`ys export`: the store's records as the export's JSON lines on `out` (header, records,
    end line; ys/store/sql/transfer_lines.py); the count per kind."""
    from ys.store.sql.transfer_lines import write

    return write(store, out, **filters)


def check_export(src: IO[str], name: str) -> tuple[IO[str], dict[str, int]]:
    """`ys import`: the whole export read and checked before anything is written; returns it
    ready to read again (`read_export`) and the count per kind. INVALID_ARGUMENT naming the
    line otherwise (cut short, edited, unknown or newer format)."""
    from ys.store.sql.transfer_lines import check

    return check(src, name)


def read_export(src: IO[str], name: str) -> Iterator[ExportLine]:
    """The records of an export `check_export` passed, for `Store.import_records`."""
    from ys.store.sql.transfer_lines import records

    return records(src, name)


__all__ = [
    "Store",
    "check_backup",
    "check_export",
    "inspect_postgres",
    "is_postgres",
    "open_store",
    "read_export",
    "require_driver",
    "restore_backup",
    "write_export",
]
