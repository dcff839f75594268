"""Options and arguments that several commands share, and their shell completions.

Completion callbacks ask the daemon with a short timeout and never start it: a Tab press must
not leave a daemon behind, and no answer means no suggestions.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ys.durations import parse_duration


def _ask(fn: Any) -> list[str]:
    try:
        from ys.client import Client

        with Client(autostart=False, timeout=1.0) as c:
            return list(fn(c))
    except Exception:
        return []


def complete_workflows(incomplete: str) -> list[str]:
    return [
        n
        for n in _ask(lambda c: (w["name"] for w in c.workflows()["workflows"]))
        if n.startswith(incomplete)
    ]


def complete_executions(incomplete: str) -> list[str]:
    return [
        i
        for i in _ask(lambda c: (r["execution_id"] for r in c.list(limit=200)["executions"]))
        if i.startswith(incomplete)
    ]


def non_empty(value: str | None) -> str | None:
    """An ID, key or name argument: empty text names nothing, so it is a usage error (exit 2)
    and never reaches the daemon as a bare route."""
    if value == "":
        raise typer.BadParameter("must not be empty")
    return value


Json = Annotated[
    bool,
    typer.Option("--json", help="Print one JSON document on stdout instead of text for people."),
]

ExecutionId = Annotated[
    str,
    typer.Argument(
        metavar="ID",
        help="The execution's ID.",
        autocompletion=complete_executions,
        callback=non_empty,
        show_default=False,
    ),
]

Timeout = Annotated[
    str | None,
    typer.Option(
        "--timeout",
        metavar="DURATION",
        help="Give up after this long (90, 90s, 10m, 2h, 1d) and exit 6.",
        show_default=False,
    ),
]

# Paging through executions (`ys ps`, `ys list`) and events (`ys history`).
ExecutionsPerPage = Annotated[
    int, typer.Option("--limit", min=1, max=1000, help="At most this many executions per page.")
]
PageToken = Annotated[
    str | None,
    typer.Option(
        "--page-token", help="Continue from where the previous page ended.", show_default=False
    ),
]


# The filters that select executions (`ys list`, `ys export`, and `ys cancel` and `ys retry`
# instead of an ID): one declaration each; a command whose filters only qualify another way of
# choosing (cancel's ID, retry's --status) gives the prefix that says so.
def _help(prefix: str, text: str) -> str:
    return prefix + text if prefix else text[0].upper() + text[1:]


def workflow_filter(prefix: str = "", metavar: str | None = None) -> Any:
    """--workflow; with a metavar (`ys export`'s W) the help names it."""
    which = f"workflow {metavar}" if metavar else "this workflow"
    return typer.Option(
        "--workflow",
        metavar=metavar,
        help=_help(prefix, f"only executions of {which}."),
        show_default=False,
    )


def since_filter(prefix: str = "") -> Any:
    return typer.Option(
        "--since",
        metavar="DUR",
        help=_help(prefix, "only executions admitted in the last DUR (30s, 10m, 2h, 7d)."),
        show_default=False,
    )


def tag_filter(prefix: str = "") -> Any:
    return typer.Option(
        "--tag",
        metavar="KEY=VALUE",
        help=_help(prefix, "only executions with this tag (repeat: all of them)."),
        show_default=False,
    )


WorkflowFilter = Annotated[str | None, workflow_filter()]
SinceFilter = Annotated[str | None, since_filter()]
TagFilter = Annotated[list[str] | None, tag_filter()]


def status_filter(help: str) -> Any:
    """--status, whose statuses (and so its help) are each command's own."""
    return typer.Option("--status", help=help, show_default=False)


def timeout_seconds(text: str | None) -> float | None:
    return None if text is None else parse_duration(text, "--timeout")


def reflow(doc: str | None) -> str:
    """A docstring as help text: paragraphs kept, the source's line breaks inside them not
    (typer's rich help would print them as they are)."""
    import inspect

    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


def add(app: typer.Typer, name: str, fn: Any) -> None:
    """Register `fn` as command `name`, its docstring as its help."""
    app.command(name, help=reflow(fn.__doc__))(fn)
