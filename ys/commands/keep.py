"""`ys backup FILE` and `ys restore FILE`: copies of the SQLite database that can be kept.

`backup` asks the running daemon (started if need be) for a consistent copy of its live file;
`restore` works with the daemon stopped: it takes the database's lock itself, so no daemon can
start while the file is being put in place (`ys.store.restore_backup`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from ys.commands._opts import Json, add
from ys.commands._output import client, emit_json, error

File = Annotated[
    Path,
    typer.Argument(metavar="FILE", help="The backup file.", show_default=False),
]


def backup(file: File, json_: Json = False) -> None:
    """Copy the live SQLite database to FILE (a new file) while the daemon runs.

    The copy is one consistent snapshot (the daemon keeps running steps meanwhile), fsynced
    and checked with integrity_check before this says done. FILE must not exist: nothing is
    ever overwritten. --json prints {"path", "bytes", "seconds", "executions",
    "schema_version"}. On PostgreSQL, use pg_dump instead (exit 2).
    """
    target = os.path.abspath(os.fspath(file))
    if os.path.lexists(target):
        raise error(
            "INVALID_ARGUMENT",
            f"{target} already exists; ys never overwrites it",
            hint="give a new file name or remove it",
        )
    with client(timeout=None) as c:
        result = c.backup(target)
    if json_:
        emit_json(result)
        return
    from ys.commands import _render

    n = result["executions"]
    _render.note(
        f"backed up {n} execution{'' if n == 1 else 's'} to {result['path']} "
        f"({result['bytes']} bytes, checked); `ys restore {result['path']}` puts it back"
    )


def restore(file: File, json_: Json = False) -> None:
    """Put a backup in place of the SQLite database; the daemon must be stopped.

    FILE is checked first (a ys database, intact, not of a newer ys); the current database is
    kept aside as ys.db.before-restore-<time>, never overwritten. --json prints {"restored",
    "database", "kept_aside", "executions", "schema_version"}.
    """
    from ys.daemon.main import _lock, release
    from ys.paths import resolve
    from ys.settings import load
    from ys.store import check_backup, restore_backup

    paths = resolve()
    settings = load(paths.config)
    if settings.postgres:
        raise error(
            "INVALID_ARGUMENT",
            "the database is PostgreSQL: restore it with pg_restore",
            hint="ys restore puts back a SQLite backup",
        )
    source = Path(os.path.abspath(os.fspath(file)))
    check_backup(source)  # before anything else: a wrong file changes nothing
    paths.db.parent.mkdir(parents=True, exist_ok=True)
    held, holder = _lock(paths.lock)
    if held is None:
        raise error(
            "FAILED_PRECONDITION",
            f"a daemon (pid {holder}) has the database {paths.db} open",
            hint="stop it first (`ys daemon stop`), then restore",
        )
    try:
        result = restore_backup(source, paths.db)
    finally:
        release([held])
    if json_:
        emit_json(result)
        return
    from ys.commands import _render

    aside = result["kept_aside"]
    kept = f"; the database before is kept as {aside}" if aside else ""
    _render.note(f"restored {source} to {paths.db} ({result['executions']} executions){kept}")


def register(app: typer.Typer) -> None:
    add(app, "backup", backup)
    add(app, "restore", restore)
