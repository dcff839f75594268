"""`ys man install` copies the man pages that ship inside the package where `man` looks for a
user's pages; `ys help CMD` shows one command's page through the pager.

The pages are generated from the commands by scripts/gen_docs.py into ys/man/ (package data).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from ys.commands._opts import Json, add
from ys.commands._output import fail

PAGES = Path(__file__).resolve().parent.parent / "man"

man_app = typer.Typer(
    help="Install ys's man pages where man(1) finds them.",
    no_args_is_help=True,
    suggest_commands=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def pages() -> list[Path]:
    found = sorted(PAGES.glob("*.1"))
    if not found:
        fail("INTERNAL", f"no man pages in {PAGES}: this install of ys is incomplete; reinstall it")
    return found


def user_man_dir() -> Path:
    """`$XDG_DATA_HOME/man` (default ~/.local/share/man): man-db searches it when ~/.local/bin
    is on PATH, or when MANPATH names it."""
    data = os.environ.get("XDG_DATA_HOME", "")
    home = Path(os.environ.get("HOME") or Path.home())
    return (Path(data) if os.path.isabs(data) else home / ".local" / "share") / "man"


def _searched(folder: Path) -> bool:
    """Whether `man` already looks in `folder` (asked of manpath(1) where it exists)."""
    manpath = shutil.which("manpath")
    if manpath is None:
        listed = os.environ.get("MANPATH", "")
    else:
        done = subprocess.run([manpath, "-q"], capture_output=True, text=True, check=False)
        listed = done.stdout.strip()
    return str(folder) in [p.rstrip("/") for p in listed.split(":")]


def install(
    to: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            metavar="DIR",
            help="Install under DIR/man1 instead of ~/.local/share/man/man1.",
            show_default=False,
        ),
    ] = None,
    json_out: Json = False,
) -> None:
    """Copy ys's man pages under ~/.local/share/man/man1 (or --dir DIR/man1).

    Afterwards `man ys-trigger` works; when `man` does not search that folder yet, it prints the
    MANPATH line to add to your shell's start-up file. Running it again brings the pages up to
    date.
    """
    root = to if to is not None else user_man_dir()
    folder = root / "man1"
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for page in pages():
        dest = folder / page.name
        text = page.read_bytes()
        if not dest.exists() or dest.read_bytes() != text:
            tmp = dest.with_name(dest.name + ".tmp")
            tmp.write_bytes(text)
            os.replace(tmp, dest)
            written += 1
    total = len(pages())
    hint = None if _searched(root) else f'export MANPATH="{root}:$MANPATH"'
    if json_out:
        import json

        doc = {"path": str(folder), "pages": total, "written": written, "manpath_hint": hint}
        sys.stdout.write(json.dumps(doc) + "\n")
        return
    sys.stdout.write(
        f"{total} man pages in {folder} ({written} written, {total - written} up to date)\n"
    )
    if hint:
        sys.stdout.write(
            f"man does not look there yet: add this line to your shell's rc file:\n  {hint}\n"
        )
    else:
        sys.stdout.write("try: man ys-trigger\n")


def page_for(words: list[str]) -> Path:
    name = "-".join(["ys", *words]) + ".1"
    path = PAGES / name
    if not path.is_file():
        fail("INVALID_ARGUMENT", f"no command `ys {' '.join(words)}`", hint="see `ys --help`")
    return path


def help_(
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[COMMAND]...",
            help="The command, as typed after ys (`trigger`, `schedule add`); none: ys itself.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show a command's man page through the pager (`ys help schedule add`).

    Uses man(1) where it is installed (MANPAGER or PAGER choose the pager); else the page's
    text goes through $PAGER.
    """
    path = page_for(command or [])
    man = shutil.which("man")
    if man is not None:
        raise typer.Exit(subprocess.call([man, "-l", str(path)]))
    import click

    from ys.commands.app import command as root

    cmd: click.Command = root()
    ctx = click.Context(cmd, info_name="ys")
    for word in command or []:
        assert isinstance(cmd, click.Group)
        sub = cmd.get_command(ctx, word)
        assert sub is not None  # the page exists, so the command does
        cmd, ctx = sub, click.Context(sub, info_name=word, parent=ctx)
    click.echo_via_pager(cmd.get_help(ctx))


add(man_app, "install", install)


def register(app: typer.Typer) -> None:
    app.add_typer(man_app, name="man")
    add(app, "help", help_)
