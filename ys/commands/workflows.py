"""`ys workflows [pause|resume W]`: the scripts in the workflows folder, as the daemon loaded
them, and pausing one's deliveries."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ys.commands._opts import Json, add, complete_workflows, non_empty, reflow
from ys.commands._output import client, emit_json, fail

Check = Annotated[
    bool,
    typer.Option(
        "--check",
        help="Exit 2 (INVALID_ARGUMENT) when a script cannot load, naming each and why.",
    ),
]

workflows_app = typer.Typer(
    no_args_is_help=False,
    suggest_commands=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

Name = Annotated[
    str,
    typer.Argument(
        metavar="WORKFLOW",
        help="The workflow's name.",
        autocompletion=complete_workflows,
        callback=non_empty,
        show_default=False,
    ),
]


def workflows(ctx: typer.Context, json_: Json = False, check: Check = False) -> None:
    """List the workflows: name, kind (python or shell), script version, schedule, path and
    load error.

    A script that fails to load is listed with its error; its executions wait until it is
    fixed; a warning there (a failure handler that names no workflow) does not stop it
    running. VERSION is the short SHA-256 of the script now; OLDER counts the executions not yet
    finished that were admitted under an older version (pinned ones keep running it).
    With --check, a script that cannot load (an unknown option, a bad value such as
    `# ys: memory_max=lots` or an env_file that does not exist) also makes it exit 2, after
    the listing, with one line on stderr naming each such script and its error.
    """
    if ctx.invoked_subcommand is not None:
        return
    with client() as c:
        result = c.workflows()
    if json_:
        emit_json(result)
    else:
        _show(result)
    broken = [w for w in result["workflows"] if w.get("error")]
    if check and broken:
        what = "; ".join(f"{w['name']}: {w['error']}" for w in broken)
        fail(
            "INVALID_ARGUMENT",
            f"{len(broken)} script(s) cannot load: {what}; fix them in the workflows folder "
            "and run `ys workflows --check` again",
        )


def _show(result: dict[str, Any]) -> None:
    from ys.commands import _render

    items = result["workflows"]
    if not items:
        with client() as c:
            folder = c.version().get("paths", {}).get("workflows", "the workflows folder")
        _render.note(f"no workflows yet; put scripts in {folder}")
        return
    t = _render.table("NAME", "KIND", "VERSION", "OLDER", "SCHEDULE", "STATE", "PATH", "ERROR")
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
            _render.Text("paused", style="yellow") if w.get("paused") else "-",
            w.get("path") or "",
            error,
        )
    _render.show(_render.fit(t, "PATH", "ERROR", "SCHEDULE"))


def pause(name: Name, json_: Json = False) -> None:
    """Pause a workflow: no new delivery of it starts, on any daemon sharing the database.

    Triggers and schedules still admit its executions; they wait, shown as "waiting: workflow
    paused", until `ys workflows resume`. Deliveries already running finish. An unknown
    workflow exits 4.
    """
    _set(name, True, json_)


def resume(name: Name, json_: Json = False) -> None:
    """Resume a paused workflow: its waiting executions are due again."""
    _set(name, False, json_)


def _set(name: str, paused: bool, json_: bool) -> None:
    with client() as c:
        result = c.workflow_pause(name, paused)
    if json_:
        emit_json(result)
        return
    from ys.commands import _render

    verb = "paused" if paused else "resumed"
    _render.note(
        f"{verb} workflow {name}" if result["changed"] else f"workflow {name} was already {verb}"
    )


def _schedule(declared: dict[str, Any] | None) -> str:
    """The declared schedule as people write it: its expression, and its zone when not local."""
    if not declared or not (declared.get("schedule") or declared.get("every")):
        return "-"
    tz = declared.get("tz")
    rule = declared.get("schedule") or f"every {declared['every']}"  # `every="15m"`
    return str(rule) + (f" {tz}" if tz and tz != "local" else "")


def register(app: typer.Typer) -> None:
    workflows_app.callback(invoke_without_command=True, help=reflow(workflows.__doc__))(workflows)
    add(workflows_app, "pause", pause)
    add(workflows_app, "resume", resume)
    app.add_typer(workflows_app, name="workflows")
