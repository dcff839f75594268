"""`ys cron import [FILE|-] [--dry-run]`: a crontab's entries as scheduled shell workflows in
the workflows folder (ys.commands._crontab reads it and writes each script's text)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ys.commands._opts import Json, add
from ys.commands._output import emit_json, fail

cron_app = typer.Typer(
    help="Move off cron: import a crontab's entries as scheduled workflows.",
    no_args_is_help=True,
    suggest_commands=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _read(source: str) -> str:
    if source == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            fail(
                "INVALID_ARGUMENT",
                f"cannot read {source}: {exc.strerror or exc}",
                hint="give a crontab file, or - to read stdin (`crontab -l | ys cron import -`)",
            )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail("INVALID_ARGUMENT", f"{source} is not UTF-8 text (byte {exc.start})")


def _taken(folder: Path, name: str) -> str | None:
    """Why `name` cannot be written in the folder: a workflow (any kind) already has it."""
    try:
        same = sorted(p.name for p in folder.iterdir() if p.stem == name)
    except FileNotFoundError:
        return None
    return f"a name taken: {same[0]} is in the workflows folder" if same else None


def _write(path: Path, text: str) -> bool:
    """Create the file, executable; False (nothing written) if it exists already."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o700)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return True


def import_(
    source: Annotated[
        str,
        typer.Argument(
            metavar="[FILE|-]",
            help="The crontab to read (`crontab -l` format); - or nothing reads stdin.",
            show_default=False,
        ),
    ] = "-",
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Say what would be written, and write nothing."),
    ] = False,
    json_: Json = False,
) -> None:
    """Write one scheduled shell workflow per crontab entry into the workflows folder.

    Reads the crontab as Debian's cron does (cron(5)): five fields or @hourly-style words,
    NAME=value lines (exported by the entries below them), % in a command as its stdin
    (further % as newlines, \\% a plain %), MAILTO. Each entry becomes cron-<line>-<slug>.sh:
    its schedule in the `# ys:` header (local time), the command as one `ys step run` step
    run by $SHELL in $HOME. A file is never overwritten. With MAILTO set, the entries get
    on_failure=cron-mail and cron-mail.sh is written: it mails a failure with `sendmail -t`,
    or prints it to its log without sendmail.

    Prints one line per entry: its workflow, or why it was skipped (@reboot, six fields, a
    name taken, ...); exits 1 when any was skipped. A line cron itself would refuse (a field
    out of range, seven fields, no command) is a usage error (exit 2): nothing is written. With --json: {"entries": [{"line",
    "workflow", "path", "schedule", "skipped"}, ...], "mail_handler", "dry_run"}.
    """
    from ys.commands import _crontab
    from ys.paths import resolve

    text = _read(source)
    shown = "stdin" if source == "-" else str(Path(source).absolute())
    tab = _crontab.parse(text)
    if tab.refused:  # as `crontab` installs nothing from a file with errors
        lines = "; ".join(f"line {r.line}: {r.reason}" for r in tab.refused)
        fail(
            "INVALID_ARGUMENT",
            f"{shown} is not a crontab cron would take ({lines}); nothing was written: fix or "
            "comment out those lines and import again",
        )
    folder = resolve().workflows
    if not dry_run:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    rows: list[dict[str, Any]] = [
        {"line": s.line, "workflow": None, "path": None, "schedule": None, "skipped": s.reason}
        for s in tab.skipped
    ]
    mail = None
    for entry in tab.entries:
        name = entry.workflow
        path = folder / f"{name}.sh"
        row = {"line": entry.line, "workflow": name, "path": str(path), "schedule": entry.schedule}
        why = _taken(folder, name)
        if why is None and not dry_run and not _write(path, _crontab.script(entry, shown)):
            why = f"a name taken: {path.name} is in the workflows folder"
        rows.append(row | {"skipped": why})
        if why is None and entry.mailto:
            mail = folder / f"{_crontab.MAIL_HANDLER}.sh"
    if mail is not None and not dry_run and not _write(mail, _crontab.MAIL_SCRIPT):
        sys.stderr.write(f"note: {mail.name} is there already and is kept as it is\n")
    rows.sort(key=lambda r: r["line"])
    if json_:
        handler = None if mail is None else str(mail)
        emit_json({"entries": rows, "mail_handler": handler, "dry_run": dry_run})
    else:
        verb = "would write" if dry_run else "wrote"
        for r in rows:
            if r["skipped"]:
                sys.stdout.write(f"line {r['line']}: skipped: {r['skipped']}\n")
            else:
                sys.stdout.write(f"line {r['line']}: {r['workflow']} ({r['schedule']})\n")
        if mail is not None:
            sys.stdout.write(f"{verb} {mail.name}: failures are mailed to MAILTO\n")
        sys.stdout.flush()
    if any(r["skipped"] for r in rows):
        raise typer.Exit(1)


add(cron_app, "import", import_)


def register(app: typer.Typer) -> None:
    app.add_typer(cron_app, name="cron")
