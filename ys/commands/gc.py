"""`ys gc`: prune old finished executions and their logs (the daemon also does it daily)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ys.commands._opts import Json, add
from ys.commands._output import client, emit_json


def gc(
    older_than: Annotated[str | None, typer.Option(
        "--older-than", metavar="DURATION",
        help="Prune executions finished longer ago than this (90, 10m, 2h, 30d; default: "
             "the daemon's YS_RETENTION_DAYS, 30 days).", show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print what would be pruned and change nothing.")] = False,
    json_: Json = False,
) -> None:
    """Prune finished executions (completed, failed, cancelled) and their logs.

    Prints the IDs pruned (or, with --dry-run, that would be), one per line. Executions that
    have not finished, parents of children still running, and effect records are kept. With
    --json: {"pruned": [...], "count": N, "dry_run": bool}.
    """
    from ys.durations import parse_duration

    seconds = None if older_than is None else parse_duration(older_than, "--older-than")
    with client(timeout=None) as c:
        result = c.gc(seconds, dry_run=dry_run)
    if json_:
        emit_json(result)
        return
    sys.stdout.write("".join(f"{i}\n" for i in result["pruned"]))
    from ys.commands import _render

    n = result["count"]
    age = f" finished over {older_than} ago" if older_than is not None else (
        " past the retention period")
    what = f"{n} execution{'' if n == 1 else 's'}{age}"
    if n == 0:
        _render.note(f"nothing to prune: no execution{age}")
    elif dry_run:
        _render.note(f"would prune {what}; run again without --dry-run to prune them")
    else:
        _render.note(f"pruned {what} and their logs")


def register(app: typer.Typer) -> None:
    add(app, "gc", gc)
