"""`ys export`, `ys import` and `ys migrate`: every record as JSON lines, out of one database and
into another (either adapter; the format: ys/store/sql/transfer.py).

They open the database themselves rather than ask the daemon: a bulk copy of every record
would otherwise pass through the daemon's socket and compete with its workers, and none of it
needs a daemon. `ys export` reads one snapshot, beside a running daemon too (SQLite's WAL lets
a reader run beside the writer; PostgreSQL is shared anyway). Writing a SQLite file needs its
daemon stopped (one daemon owns the file: `ys import` and `ys migrate` take its lock, as `ys
restore` does); `ys migrate` needs the source's daemon stopped, so that what moves runs in one
place only, and marks the source as moved once it is done (no daemon starts on it again).
PostgreSQL daemons may run while an import writes: they hear of what became due.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from ys.commands._opts import Json, SinceFilter, add, workflow_filter
from ys.commands._output import emit_json, error
from ys.commands.executions import Statuses
from ys.durations import parse_duration

KINDS = ("script", "value", "effect", "schedule", "execution")
PLURAL = {
    "script": "script versions",
    "value": "values",
    "effect": "effects",
    "schedule": "schedules",
    "execution": "executions",
}


@contextmanager
def _database(*, write: bool, what: str) -> Iterator[tuple[str, bool]]:
    """The configured database's setting and whether this process may write it; with
    `write`, a SQLite file's daemon lock held throughout (FAILED_PRECONDITION if a daemon has
    it). Without: a SQLite file's lock held if no daemon has it (the file is then opened as a
    daemon would, an older one migrated), else read beside its daemon; PostgreSQL read only."""
    from ys.paths import resolve
    from ys.settings import load

    paths = resolve()
    settings = load(paths.config)
    if settings.database:
        yield settings.database, write
        return
    if write:
        with _locked(paths.db, paths.lock, what):
            yield os.fspath(paths.db), True
        return
    if not paths.db.exists():
        raise error(
            "NOT_FOUND", f"there is no database at {paths.db} yet", hint=f"nothing to {what}"
        )
    from ys.daemon.main import _lock, release

    held, _ = _lock(paths.lock)
    try:
        yield os.fspath(paths.db), held is not None
    finally:
        if held is not None:
            release([held])


@contextmanager
def _locked(db: Any, lock: Any, what: str) -> Iterator[None]:
    from ys.daemon.main import _lock, release

    db.parent.mkdir(parents=True, exist_ok=True)
    held, holder = _lock(lock)
    if held is None:
        raise error(
            "FAILED_PRECONDITION",
            f"a daemon (pid {holder}) has the database {db} open",
            hint=f"stop it first (`ys daemon stop`), then {what}",
        )
    try:
        yield
    finally:
        release([held])


def export(
    since: SinceFilter = None,
    status: Statuses = None,
    workflow: Annotated[str | None, workflow_filter(metavar="W")] = None,
) -> None:
    """Write every record of the database as JSON lines on stdout (`ys export > ys.jsonl`).

    Every execution with its history, steps, child starts, effect and value waits and log
    tails; the effect ledger (with its conflicting reports), durable values, schedules (with
    their cursors) and script versions. The first line names the format version, the last
    one counts the records; each line carries its own check. The filters narrow the
    executions only. One consistent snapshot, read beside a running daemon too (with none, a
    database of an older ys is first upgraded, as a daemon start would); an execution running
    at that moment is written as released when its lease ends, and due, so that it runs on
    where it is imported. Memory stays the same however many records there are. A count per
    kind goes to stderr. `ys import` reads it back, into SQLite or PostgreSQL.
    """
    from ys.store import open_store, write_export

    since_s = None if since is None else parse_duration(since, "--since")
    with _database(write=False, what="export") as (db, writable):
        store = open_store(db, read_only=not writable)
        try:
            now = time.time()
            out = sys.stdout
            counts = write_export(
                store,
                out,
                since=None if since_s is None else now - since_s,
                statuses=[s.value for s in status or []],
                workflow=workflow,
            )
            out.flush()
        finally:
            store.close()
    sys.stderr.write(f"exported {_said(counts)}\n")


def _said(counts: dict[str, int]) -> str:
    return ", ".join(f"{counts[k]} {PLURAL[k]}" for k in KINDS)


class Tally:
    """What an import did, per kind, and its conflicts said on stderr as they come."""

    def __init__(self, quiet: bool = False) -> None:
        self.counts = {k: {"imported": 0, "skipped": 0, "conflicts": 0} for k in KINDS}
        self.conflicts: list[dict[str, str]] = []
        self.quiet = quiet

    def __call__(self, counts: dict[str, dict[str, int]], conflicts: list[tuple[str, str]]) -> None:
        for kind, c in counts.items():
            for k, n in c.items():
                self.counts[kind][k] += n
        for kind, name in conflicts:
            self.conflicts.append({"kind": kind, "name": name})
            sys.stderr.write(
                f"CONFLICT: {kind} {name!r} is already in the database with other contents; "
                "left as it is\n"
            )

    def done(self) -> int:
        return sum(c["imported"] + c["skipped"] + c["conflicts"] for c in self.counts.values())

    def summary(self) -> str:
        parts = []
        for k in KINDS:
            c = self.counts[k]
            s = f"{c['imported']} {PLURAL[k]}"
            extra = [f"{c['skipped']} there already"] if c["skipped"] else []
            extra += [f"{c['conflicts']} in conflict"] if c["conflicts"] else []
            parts.append(s + (f" ({', '.join(extra)})" if extra else ""))
        return ", ".join(parts)

    def result(self) -> dict[str, Any]:
        return {"counts": self.counts, "conflicts": self.conflicts}


def import_(
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE", help="An export `ys export` wrote, or - for stdin.", show_default=False
        ),
    ],
    json_: Json = False,
) -> None:
    """Import an export (FILE, or - for stdin) into the database, SQLite or PostgreSQL.

    The whole input is read and checked first: a line cut short or edited, an unknown or
    newer format version, or a database of a newer ys is refused (exit 2) with nothing
    written. Then the records are written a batch per transaction (an interrupted import is
    run again: what is there is skipped). A record already there with the same contents (an
    execution: the same history) is skipped; one with other contents is a conflict, named on
    stderr and left as it is (exit 3). Into a SQLite file the daemon must be stopped.
    --json prints {"counts": {kind: {"imported", "skipped", "conflicts"}}, "conflicts"}.
    """
    from ys.store import check_export, open_store, read_export

    name = "standard input" if file == "-" else file
    try:
        src = sys.stdin if file == "-" else open(file, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise error("INVALID_ARGUMENT", f"{file}: cannot be read ({exc.strerror})") from None
    try:
        checked, _ = check_export(src, name)
        with _database(write=True, what="import") as (db, _postgres):
            store = open_store(db)
            try:
                tally = Tally()
                store.import_records(read_export(checked, name), tally)
            finally:
                store.close()
    except UnicodeDecodeError:
        raise error(
            "INVALID_ARGUMENT", f"{name} is not text; give a file `ys export` wrote"
        ) from None
    finally:
        src.close()
    _finish(tally, json_, "imported")


def _finish(tally: Tally, json_: bool, verb: str) -> None:
    if json_:
        emit_json(tally.result())
    else:
        from ys.commands import _render

        _render.note(f"{verb} {tally.summary()}")
    if tally.conflicts:
        raise typer.Exit(3)


def migrate(
    to: Annotated[
        str,
        typer.Option(
            "--to",
            metavar="URL",
            help="The database to move to: postgresql://... (a password is better in PGPASSWORD "
            "or ~/.pgpass than here), or a SQLite file.",
            show_default=False,
        ),
    ],
    merge: Annotated[
        bool, typer.Option("--merge", help="Also into a database that holds executions already.")
    ] = False,
    json_: Json = False,
) -> None:
    """Move every record of this database to another: `ys export` piped to `ys import`.

    Stop the daemon first (this database's; it would run what moves twice). A progress bar
    on stderr, then the count per kind. A target that holds executions already is refused
    (exit 3) unless --merge: then records there with the same contents are skipped, others
    are conflicts named on stderr (exit 3; the conflicting records stay only here, readable
    for settling). Live executions move as they are (a running one as due), so that daemons
    started on the target go on with them and run nothing twice. This database keeps its
    records but is marked as moved, conflicts or not: a daemon refuses to start on it, naming
    the target (`ys daemon run` exits 3; `ys daemon start` and autostart exit 5), so point
    `database` in config.toml (or YS_DATABASE) at the target before starting daemons again.
    --json prints what `ys import --json` does.
    """
    from ys.paths import resolve
    from ys.settings import load, redact
    from ys.store import is_postgres, open_store

    paths = resolve()
    settings = load(paths.config)
    source = settings.database or os.fspath(paths.db)
    target = to if is_postgres(to) else os.path.abspath(to)
    if target == source or (not is_postgres(to) and os.path.abspath(source) == target):
        raise error("INVALID_ARGUMENT", "the target is this database; give another with --to")
    if not settings.database and not paths.db.exists():
        raise error("NOT_FOUND", f"there is no database at {paths.db} yet", hint="nothing to move")
    from contextlib import nullcontext

    # the source's daemon stopped (a SQLite file's lock held throughout)
    held = nullcontext() if settings.database else _locked(paths.db, paths.lock, "migrate")
    with held:
        src = open_store(source)
        try:
            dst = open_store(target)
            try:
                if dst.holds_executions() and not merge:
                    raise error(
                        "FAILED_PRECONDITION",
                        "the target database holds executions already",
                        hint="give --merge to add these to them, or another database",
                    )
                tally = Tally()
                _move(src, dst, tally, show=not json_ and sys.stderr.isatty())
                # the data is there now, not here: no daemon starts on the source again
                dst.mark_moved(None)
                src.mark_moved(redact(target))
            finally:
                dst.close()
        finally:
            src.close()
    _finish(tally, json_, "moved")


def _move(src: Any, dst: Any, tally: Tally, show: bool) -> None:
    """The source's export fed to the target's import through a bounded queue (one thread
    reads, this one writes): memory holds a queue's worth, however many records."""
    total = sum(src.record_counts().values())
    q: queue.Queue[Any] = queue.Queue(maxsize=1000)
    done = object()
    failed: list[BaseException] = []

    def read() -> None:
        try:
            src.export_records(q.put)
        except BaseException as exc:  # noqa: BLE001 - handed to the writing thread
            failed.append(exc)
        finally:
            q.put(done)

    def records() -> Iterator[dict[str, Any]]:
        while (r := q.get()) is not done:
            yield r

    reader = threading.Thread(target=read, name="ys-migrate-export", daemon=True)
    reader.start()
    with _progress(total, show) as advance:

        def on_batch(counts: dict[str, dict[str, int]], conflicts: list[tuple[str, str]]) -> None:
            before = tally.done()
            tally(counts, conflicts)
            advance(tally.done() - before)

        try:
            dst.import_records(records(), on_batch)
        finally:
            while reader.is_alive():  # let a reader blocked on a full queue finish
                try:
                    q.get(timeout=0.1)
                except queue.Empty:
                    pass
            reader.join()
    if failed:
        raise failed[0]


@contextmanager
def _progress(total: int, show: bool) -> Iterator[Callable[[int], None]]:
    if not show:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("moving"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("records", total=total)
        yield lambda n: bar.advance(task, n)


def register(app: typer.Typer) -> None:
    add(app, "export", export)
    add(app, "import", import_)
    add(app, "migrate", migrate)
