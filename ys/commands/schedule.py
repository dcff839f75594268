"""`ys schedule add|list|next|rm|pause|resume`: cron schedules that trigger workflows.

A fire admits `<name>@<slot in UTC>`, so a slot runs once however often the daemon restarts.
Schedules declared by scripts (`@ys.workflow(schedule=...)`, `# ys: schedule=...`) are listed
here too, with source `script`; they follow their script.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated, Any

import typer

from ys.commands._opts import Json, _ask, add, complete_workflows, non_empty
from ys.commands._output import client, emit_json
from ys.errors import YsError

schedule_app = typer.Typer(
    help="Cron schedules: trigger a workflow at the times a cron expression names.",
    no_args_is_help=True,
    suggest_commands=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class CatchUp(StrEnum):
    once = "once"
    all = "all"
    skip = "skip"


class Overlap(StrEnum):
    skip = "skip"
    queue = "queue"
    allow = "allow"


def complete_schedules(incomplete: str) -> list[str]:
    return [
        n
        for n in _ask(lambda c: (s["name"] for s in c.schedules()["schedules"]))
        if n.startswith(incomplete)
    ]


Name = Annotated[
    str,
    typer.Argument(
        metavar="NAME",
        help="The schedule's name.",
        autocompletion=complete_schedules,
        callback=non_empty,
        show_default=False,
    ),
]


def _known(name: str, fn: Any) -> Any:
    """Call the daemon about one schedule; a missing one says how to see the others."""
    with client() as c:
        try:
            return fn(c)
        except YsError as exc:
            if exc.code == "NOT_FOUND":
                exc.context["hint"] = "`ys schedule list` shows the schedules there are"
            raise


def add_(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME",
            help="The schedule's name: printable text without '@', at most 128 "
            "characters. Its fires are executions NAME@<slot in UTC>.",
            callback=non_empty,
            show_default=False,
        ),
    ],
    workflow: Annotated[
        str,
        typer.Argument(
            metavar="WORKFLOW",
            help="The workflow to trigger.",
            autocompletion=complete_workflows,
            show_default=False,
        ),
    ],
    cron: Annotated[
        str,
        typer.Option(
            "--cron",
            metavar="EXPR",
            help="When: a cron expression of five fields, minute hour "
            'day month weekday, such as "0 3 * * *" (03:00 every '
            'day) or "*/15 * * * *"; or @hourly, @daily, @weekly, '
            "@monthly, @yearly.",
            show_default=False,
        ),
    ],
    tz: Annotated[
        str | None,
        typer.Option(
            "--tz",
            metavar="ZONE",
            help="The time zone the expression is read in, an IANA name "
            "such as Europe/Paris or UTC (default: this machine's).",
            show_default=False,
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "-p",
            "--param",
            metavar="KEY=VALUE",
            help="A param of every fire (repeatable); the value is JSON when it parses, else text.",
            show_default=False,
        ),
    ] = None,
    params: Annotated[
        str | None,
        typer.Option(
            "--params",
            metavar="JSON|@FILE|-",
            help="All params as a JSON object.",
            show_default=False,
        ),
    ] = None,
    catch_up: Annotated[
        CatchUp,
        typer.Option(
            "--catch-up",
            help="Slots missed while the machine slept or the daemon was down: fire "
            "the latest once, all of them, or skip them.",
        ),
    ] = CatchUp.once,
    max_late: Annotated[
        str | None,
        typer.Option(
            "--max-late",
            metavar="DURATION",
            help="Never fire a missed slot older than this (90, 10m, 2h, 1d).",
            show_default=False,
        ),
    ] = None,
    overlap: Annotated[
        Overlap,
        typer.Option(
            "--overlap",
            help="When the previous fire still runs: skip this one, queue it (at most "
            "one waits), or allow both to run.",
        ),
    ] = Overlap.skip,
    jitter: Annotated[
        str | None,
        typer.Option(
            "--jitter",
            metavar="DURATION",
            help="Delay every fire by a fixed amount below this, "
            "chosen from the name (spreads a fleet).",
            show_default=False,
        ),
    ] = None,
    json_: Json = False,
) -> None:
    """Add a schedule: trigger WORKFLOW at the times --cron names.

    Each fire is an execution NAME@<slot in UTC> with the schedule's params and the context
    {schedule, slot, catch_up}. The daemon need not run at every slot: when it was down or the
    machine slept, --catch-up decides what fires. A name in use exits 3.
    """
    from ys.commands._params import build_params
    from ys.cron import zone_name
    from ys.durations import parse_duration

    body = build_params(param, params)
    if body is not None and not isinstance(body, dict):
        from ys.commands._output import fail

        fail("INVALID_ARGUMENT", "--params must be a JSON object", hint="give {...}, or use -p")
    late = None if max_late is None else parse_duration(max_late, "--max-late")
    spread = 0.0 if jitter is None else parse_duration(jitter, "--jitter")
    with client() as c:
        try:
            s = c.schedule_add(
                name,
                workflow,
                cron,
                tz=zone_name(tz),  # the caller's zone by its name, as a script's reads the daemon's
                params=body,
                catch_up=catch_up.value,
                overlap=overlap.value,
                max_late=late,
                jitter=spread,
            )
        except YsError as exc:
            if exc.code == "INVALID_ARGUMENT":
                from ys.cron import FIVE_FIELDS

                exc.context["hint"] = (
                    FIVE_FIELDS if "cron" in exc.message else "see `ys schedule add --help`"
                )
            raise
    if json_:
        emit_json(s)
        return
    from ys.commands import _render

    _render.note(
        f"schedule {s['name']} triggers {s['workflow']} at {s['cron']} ({s['tz']}); "
        f"next at {_render.local_and_relative(s.get('next_fire_at'))}"
    )


def list_(json_: Json = False) -> None:
    """List the schedules: workflow, cron, zone, next and last fire, state and source."""
    with client() as c:
        result = c.schedules()
    if json_:
        emit_json(result)
        return
    from ys.commands import _render

    items = result["schedules"]
    if not items:
        _render.note(
            "no schedules yet; add one with `ys schedule add NAME WORKFLOW --cron "
            "EXPR`, or declare one in a script"
        )
        return
    t = _render.table("NAME", "WORKFLOW", "CRON", "TZ", "NEXT", "LAST", "STATE", "SOURCE")
    for s in items:
        state = (
            _render.Text("paused", style="yellow")
            if s.get("paused")
            else (
                _render.Text("queued", style="magenta")
                if s.get("queued")
                else _render.Text("active", style="green")
            )
        )
        _render.add_row(
            t,
            s["name"],
            s["workflow"],
            s["cron"],
            s.get("tz") or "local",
            _render.local(s.get("next_fire_at")),
            _render.relative(s.get("last_fire_at")),
            state,
            s.get("source") or "-",
        )
    _render.show(_render.fit(t, "NAME", "CRON"))


def next_(
    name: Name,
    n: Annotated[
        int, typer.Option("-n", "--count", min=1, max=1000, help="How many fire times to print.")
    ] = 5,
    json_: Json = False,
) -> None:
    """Print the schedule's next fire times, one ISO 8601 UTC time per line.

    With --json: {"fire_times": [...], "paused": false}. A paused schedule fires at no time:
    it prints none (and says on stderr that it is paused), and "paused": true with --json.
    """
    result = _known(name, lambda c: c.schedule_next(name, n))
    paused = bool(result.get("paused"))
    times = list(result["fire_times"])
    if json_:
        emit_json({"fire_times": times, "paused": paused})
        return
    if paused:
        from shlex import quote

        from ys.commands import _render

        _render.note(
            f"schedule {name} is paused: nothing fires until `ys schedule resume {quote(name)}`"
        )
    sys.stdout.write("".join(f"{t}\n" for t in times))


def rm(name: Name, json_: Json = False) -> None:
    """Remove a schedule. Executions it already fired are kept.

    A schedule a script declares is refused (exit 3): it follows its script; pause it instead.
    """
    result = _known(name, lambda c: c.schedule_remove(name))
    if json_:
        emit_json(result)
        return
    from ys.commands import _render

    _render.note(f"removed schedule {name}")


def pause(name: Name, json_: Json = False) -> None:
    """Pause a schedule: nothing fires until it is resumed."""
    was, s = _known(name, lambda c: _set_paused(c, name, True))
    if json_:
        emit_json(s)
        return
    from ys.commands import _render

    _render.note(
        f"schedule {name} was already paused; nothing changed" if was else f"paused schedule {name}"
    )


def resume(name: Name, json_: Json = False) -> None:
    """Resume a paused schedule. Slots that passed while it was paused do not fire."""
    was, s = _known(name, lambda c: _set_paused(c, name, False))
    if json_:
        emit_json(s)
        return
    from ys.commands import _render

    done = f"resumed schedule {name}" if was else f"schedule {name} was not paused; nothing changed"
    _render.note(f"{done}; next at {_render.local_and_relative(s.get('next_fire_at'))}")


def _set_paused(c: Any, name: str, paused: bool) -> tuple[bool, dict[str, Any]]:
    """Whether the schedule was paused before, and the schedule after pausing or resuming it
    (the daemon's answer is the same either way: the flag is set, not toggled)."""
    was = bool(c.schedule(name)["paused"])
    return was, c.schedule_pause(name, paused)


for _name, _fn in (
    ("add", add_),
    ("list", list_),
    ("next", next_),
    ("rm", rm),
    ("pause", pause),
    ("resume", resume),
):
    add(schedule_app, _name, _fn)


def register(app: typer.Typer) -> None:
    app.add_typer(schedule_app, name="schedule")
