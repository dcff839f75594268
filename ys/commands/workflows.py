"""`ys workflows`: the scripts in the workflows folder, as the daemon loaded them."""

from __future__ import annotations

from typing import Any

import typer

from ys.commands._opts import Json, add
from ys.commands._output import client, emit_json


def workflows(json_: Json = False) -> None:
    """List the workflows: name, kind (python or shell), script version, schedule, path and
    load error.

    A script that fails to load is listed with its error; its executions wait until it is
    fixed; a warning there (a failure handler that names no workflow) does not stop it
    running. VERSION is the short SHA-256 of the script now; OLDER counts the executions not yet
    finished that were admitted under an older version (pinned ones keep running it).
    """
    with client() as c:
        result = c.workflows()
    if json_:
        emit_json(result)
        return
    from ys.commands import _render

    items = result["workflows"]
    if not items:
        with client() as c:
            folder = c.version().get("paths", {}).get("workflows", "the workflows folder")
        _render.note(f"no workflows yet; put scripts in {folder}")
        return
    t = _render.table("NAME", "KIND", "VERSION", "OLDER", "SCHEDULE", "PATH", "ERROR")
    for w in items:
        if w.get("error"):
            error = _render.Text(_render.cut(w["error"], 100), style="red")
        else:
            warned = f"warning: {w['warning']}" if w.get("warning") else ""
            error = _render.Text(_render.cut(warned, 100), style="yellow")
        version = (w.get("sha256") or "-")[:12] + (" pin" if w.get("pin") else "")
        _render.add_row(
            t,
            w["name"],
            w.get("kind") or "",
            version,
            str(w.get("older_live") or 0),
            _schedule(w.get("schedule")),
            w.get("path") or "",
            error,
        )
    _render.show(_render.fit(t, "PATH", "ERROR", "SCHEDULE"))


def _schedule(declared: dict[str, Any] | None) -> str:
    """The declared schedule as people write it: its expression, and its zone when not local."""
    if not declared or not declared.get("schedule"):
        return "-"
    tz = declared.get("tz")
    return str(declared["schedule"]) + (f" {tz}" if tz and tz != "local" else "")


def register(app: typer.Typer) -> None:
    add(app, "workflows", workflows)
