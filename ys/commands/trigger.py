"""`ys trigger`: admit an execution and print only its ID (so `id=$(ys trigger ...)` works)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from ys.commands import _admit
from ys.commands._opts import Json, Timeout, add, complete_workflows, timeout_seconds
from ys.commands._output import fail


class IfExists(StrEnum):
    fail = "fail"
    use_existing = "use-existing"


def trigger(
    workflow: Annotated[
        str,
        typer.Argument(
            metavar="WORKFLOW",
            help="The workflow's name: its file name without the extension.",
            autocompletion=complete_workflows,
            show_default=False,
        ),
    ],
    execution_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            metavar="ID",
            help="The execution's ID; ys makes one when it is not given.",
            show_default=False,
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "-p",
            "--param",
            metavar="KEY=VALUE",
            help="A param (repeatable). The value is JSON when it parses as JSON (-p order=42 is "
            "the number 42), else a string. A key may be given once.",
            show_default=False,
        ),
    ] = None,
    params: Annotated[
        str | None,
        typer.Option(
            "--params",
            metavar="JSON|@FILE|-",
            help="All params as JSON: the text itself, @FILE to read a file, or - to read stdin. "
            "With -p it must be an object.",
            show_default=False,
        ),
    ] = None,
    if_exists: Annotated[
        IfExists,
        typer.Option(
            "--if-exists",
            help="When the ID is in use: fail (exit 3), or use-existing (print the "
            "ID if the workflow and params are the same).",
        ),
    ] = IfExists.fail,
    tag: Annotated[
        list[str] | None,
        typer.Option(
            "--tag",
            metavar="KEY=VALUE",
            help="A tag (repeatable): text kept on the record, copied to the children it "
            "starts and to its retries; `ys list --tag KEY=VALUE` finds it.",
            show_default=False,
        ),
    ] = None,
    traceparent: Annotated[
        str | None,
        typer.Option(
            "--traceparent",
            metavar="TRACEPARENT",
            help="A W3C trace context (00-<trace id>-<span id>-<flags>): the execution's trace "
            "continues the caller's, its steps run in it, shell steps get TRACEPARENT.",
            show_default=False,
        ),
    ] = None,
    due_in: Annotated[
        str | None,
        typer.Option(
            "--in",
            metavar="DUR",
            help="Admit it now, due this long from now (90s, 10m, 2h, 1d): `ys ps` shows it "
            "due, `ys wake` runs it at once, `ys cancel` cancels it.",
            show_default=False,
        ),
    ] = None,
    due_at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="TIME",
            help="Admit it now, due at TIME: ISO 8601 (2026-12-24T18:00, with a zone such as "
            "Z or +01:00, or without one: local time); a time past is due now.",
            show_default=False,
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="After printing the ID, wait until the execution is finished; exit 0 "
            "if it completed, 1 if it failed or was cancelled.",
        ),
    ] = False,
    timeout: Timeout = None,
    json_: Json = False,
) -> None:
    """Admit an execution of a workflow and print its ID.

    The ID is printed once admission is committed; the daemon then delivers the execution.
    If the workflow's script cannot run yet (a syntax error, unsafe permissions, ...), the
    execution is admitted and waits until it is fixed, and a warning on stderr says why.
    With --in or --at it is admitted now and due later (its record's due_at).
    With --json: {"execution_id": ..., "started": true|false} (and "warning" then).
    """
    if timeout is not None and not wait:
        fail("INVALID_ARGUMENT", "--timeout is for --wait", hint="add --wait, or drop --timeout")
    code = _admit.trigger(
        workflow,
        execution_id,
        param,
        params,
        if_exists.value,
        json_,
        wait=wait,
        timeout=timeout_seconds(timeout),
        tags=tag,
        traceparent=traceparent,
        due_in=due_in,
        due_at=due_at,
    )
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    add(app, "trigger", trigger)
