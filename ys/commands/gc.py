"""`ys gc`: prune old finished executions and their logs (the daemon also does it daily)."""

from __future__ import annotations

from typing import Annotated

import typer

from ys.commands._opts import Json, add
from ys.commands._output import client, emit_json


def gc(
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            help="Prune executions finished longer ago than this (90, 10m, 2h, 30d; default: "
            "the daemon's YS_RETENTION_DAYS, 30 days).",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Say how many would be pruned (with --json, which) and change nothing.",
        ),
    ] = False,
    json_: Json = False,
) -> None:
    """Prune finished executions (completed, failed, cancelled) and their logs.

    Prints how many were pruned (or, with --dry-run, would be); with --json the IDs too:
    {"pruned": [...], "count": N, "dry_run": bool}. Executions that have not finished,
    parents of children still running, and effect records are kept.
    """
    from ys.durations import format_duration, parse_duration

    seconds = None if older_than is None else parse_duration(older_than, "--older-than")
    with client(timeout=None) as c:
        result = c.gc(seconds, dry_run=dry_run)
    if json_:
        emit_json(result)
        return
    from ys.commands import _render

    n = result["count"]
    if seconds is None:
        age = " past the retention period"
    elif seconds > 0:
        age = f" finished over {format_duration(seconds)} ago"
    else:
        age = " finished"  # --older-than 0: every finished one
    what = f"{n} execution{'' if n == 1 else 's'}{age}"
    if n == 0:
        _render.note(f"nothing to prune: no execution{age}")
    elif dry_run:
        _render.note(
            f"would prune {what}; `ys gc --dry-run --json` lists them, and running it "
            "again without --dry-run prunes them"
        )
    else:
        _render.note(f"pruned {what} and their logs")


def register(app: typer.Typer) -> None:
    add(app, "gc", gc)
