"""`ys workflows`: the scripts in the workflows folder, as the daemon loaded them."""

from __future__ import annotations

import typer

from ys.commands._opts import Json, add
from ys.commands._output import client, emit_json


def workflows(json_: Json = False) -> None:
    """List the workflows: name, kind (python or shell), schedule, path and load error.

    A script that fails to load is listed with its error; its executions wait until it is
    fixed.
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
    t = _render.table("NAME", "KIND", "SCHEDULE", "PATH", "ERROR")
    for w in items:
        error = _render.Text(_render.cut(w.get("error") or "", 100), style="red")
        _render.add_row(t, w["name"], w.get("kind") or "",
                        _render.compact(w.get("schedule") or "-", 40), w.get("path") or "", error)
    _render.show(_render.fit(t, "PATH", "ERROR", "SCHEDULE"))


def register(app: typer.Typer) -> None:
    add(app, "workflows", workflows)
