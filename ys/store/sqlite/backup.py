"""Copies of a SQLite database that can be kept: `ys backup` (a consistent copy of the live file,
taken through the daemon) and `ys restore` (a checked copy put back in place).

A copy of the file taken with `cp` while the daemon writes can tear (the WAL holds what the
main file does not yet). `VACUUM INTO` on a read connection copies one snapshot instead, while
the writer goes on (WAL readers never block it). The copy is written beside the target under a
temporary name, fsynced, checked (`PRAGMA integrity_check`) and only then linked to its name,
which never replaces a file that is there (docs/design.md).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import TypedDict
from urllib.parse import quote

from ys.errors import InvalidArgument
from ys.store.sqlite.schema import MIGRATIONS

SQLITE_MAGIC = b"SQLite format 3\x00"


class BackupFile(TypedDict):
    """What a checked backup file holds (`ys restore` checks it first)."""

    schema_version: int
    executions: int


class Backup(BackupFile):
    """`ys backup --json` (and POST /v1/backup): the copy written."""

    path: str
    bytes: int
    seconds: float


class Restored(BackupFile):
    """`ys restore --json`: the backup put in place, the file it replaced kept aside."""

    restored: str
    database: str
    kept_aside: str | None


def _fsync(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_file(path: str | os.PathLike[str]) -> BackupFile:
    """What a file is, if it is a ys database this ys can open. InvalidArgument (exit 2) saying what is wrong otherwise: not there, not a
    SQLite file, not a ys database, damaged, or written by a newer ys."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"{p}: cannot be read ({exc.strerror}); give a ys backup file"
        ) from None
    if head != SQLITE_MAGIC:
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"{p} is not a ys database (not a SQLite file); give a ys backup"
        )
    conn = sqlite3.connect(f"file:{quote(os.fspath(p.resolve()))}?mode=ro", uri=True)
    try:
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            if not {"executions", "schema_migrations"} <= names:
                raise InvalidArgument(
                    "INVALID_ARGUMENT",
                    f"{p} is a SQLite file but not a ys database (no executions table); give "
                    "a file `ys backup` wrote",
                )
            version = int(
                conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[
                    0
                ]
            )
            if version > len(MIGRATIONS):
                raise InvalidArgument(
                    "INVALID_ARGUMENT",
                    f"{p} was written by a newer ys (schema {version}, this ys knows up to "
                    f"{len(MIGRATIONS)}); upgrade ys to open it",
                )
            problems = [r[0] for r in conn.execute("PRAGMA integrity_check")]
            if problems != ["ok"]:
                raise InvalidArgument(
                    "INVALID_ARGUMENT",
                    f"{p} is damaged (integrity_check: {problems[0]}); use another backup",
                )
            executions = int(conn.execute("SELECT COUNT(*) FROM executions").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"{p} cannot be read as a ys database ({exc}); give a ys backup"
            ) from None
    finally:
        conn.close()
    return {"schema_version": version, "executions": executions}


def _refuse_existing(target: Path) -> None:
    if os.path.lexists(target):
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"{target} already exists; ys never overwrites it: give a new file name or remove it",
        )


def backup(conn: sqlite3.Connection, target: str | os.PathLike[str]) -> Backup:
    """Copy the database `conn` reads into `target` (a new file): one snapshot, fsynced and
    checked before it gets its name; nothing is left under `target` if any of it fails."""
    started = time.monotonic()
    dest = Path(target)
    if not dest.is_absolute():
        raise InvalidArgument("INVALID_ARGUMENT", f"{dest}: the daemon needs an absolute path")
    _refuse_existing(dest)
    if not dest.parent.is_dir():
        raise InvalidArgument("INVALID_ARGUMENT", f"{dest.parent} is not a folder; create it first")
    partial = dest.parent / f".{dest.name}.partial-{os.getpid()}-{time.monotonic_ns()}"
    try:
        conn.execute("VACUUM INTO ?", (os.fspath(partial),))
        _fsync(partial)
        info = check_file(partial)
        _refuse_existing(dest)
        os.link(partial, dest)  # never replaces: fails if dest appeared meanwhile
        _fsync(dest.parent)
    except FileExistsError:
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"{dest} already exists; ys never overwrites it"
        ) from None
    finally:
        if os.path.lexists(partial):
            os.unlink(partial)
    return {
        "path": os.fspath(dest),
        "bytes": dest.stat().st_size,
        "seconds": round(time.monotonic() - started, 3),
        **info,
    }


def restore(source: str | os.PathLike[str], db: str | os.PathLike[str]) -> Restored:
    """Put the backup `source` in place of the database `db` (no daemon may hold it: the caller
    holds its lock). The current file, with its -wal and -shm, is kept aside as
    `<db>.before-restore-<time>`."""
    src, dbp = Path(source), Path(db)
    info = check_file(src)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = dbp.with_name(f"{dbp.name}.before-restore-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        _refuse_existing(Path(f"{aside}{suffix}"))
    staged = dbp.with_name(f".{dbp.name}.restoring-{os.getpid()}")
    try:
        with open(src, "rb") as fin, open(staged, "xb") as fout:
            while chunk := fin.read(1 << 20):
                fout.write(chunk)
            fout.flush()
            os.fsync(fout.fileno())
        kept = None
        if dbp.exists():
            for suffix in ("", "-wal", "-shm"):
                if os.path.lexists(f"{dbp}{suffix}"):
                    os.rename(f"{dbp}{suffix}", f"{aside}{suffix}")
            kept = os.fspath(aside)
        os.rename(staged, dbp)
        _fsync(dbp.parent)
    finally:
        if os.path.lexists(staged):
            os.unlink(staged)
    return {"restored": os.fspath(src), "database": os.fspath(dbp), "kept_aside": kept, **info}
