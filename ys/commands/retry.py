"""`ys retry`: a new execution of a terminal one whose first steps replay without running, or
(`--status`) one for every match."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from ys.commands._opts import (
    Json,
    add,
    complete_executions,
    since_filter,
    status_filter,
    workflow_filter,
)
from ys.commands._output import client, emit_json, error_line, fail
from ys.commands._params import build_params
from ys.contract import check_retry_status
from ys.durations import parse_duration
from ys.errors import YsError

WITH_STATUS = "With --status: "


def retry(
    execution_id: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]",
            help="The finished execution to retry (or use --status).",
            autocompletion=complete_executions,
            show_default=False,
        ),
    ] = None,
    new_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            metavar="NEW",
            help="The new execution's ID (default ID.r1, ID.r2, ...: the first free).",
            show_default=False,
        ),
    ] = None,
    from_step: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="STEP",
            help="Rerun from this step key: only the steps recorded before it are copied "
            "(default: before the first step that did not complete).",
            show_default=False,
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "-p",
            "--param",
            metavar="KEY=VALUE",
            help="New params instead of the original's (repeatable, as for trigger).",
            show_default=False,
        ),
    ] = None,
    params: Annotated[
        str | None,
        typer.Option(
            "--params",
            metavar="JSON|@FILE|-",
            help="New params as JSON instead of the original's (as for trigger).",
            show_default=False,
        ),
    ] = None,
    status: Annotated[
        str | None,
        status_filter(
            "Retry every execution with this status (failed or cancelled) instead of ID."
        ),
    ] = None,
    workflow: Annotated[str | None, workflow_filter(WITH_STATUS)] = None,
    since: Annotated[str | None, since_filter(WITH_STATUS)] = None,
    again: Annotated[
        bool,
        typer.Option(
            "--again",
            help="With --status: retry also the executions that were retried before.",
        ),
    ] = False,
    json_: Json = False,
) -> None:
    """Retry a finished execution: a new one of the same workflow (and params, unless given).

    Its history starts with copies of the original's steps recorded before --from (default:
    before the first step that did not complete), so those replay without running: a copied
    step.effect is not performed again, a copied step.start starts no second child (a step
    still waiting, such as a sleep, is not copied: it runs again). The new record's retry_of
    names the original, and the original's retried_by its newest retry. Prints the new ID; with --json
    {"execution_id", "retry_of", "copied_steps"}. A running or waiting execution is exit 3.

    With --status (failed or cancelled; and --workflow, --since) every match is retried and
    the new IDs are printed one per line (with --json, a list); a match that was retried
    before (its retried_by is set) is skipped unless --again, so a job that retries what
    failed can run again and again.
    """
    if status is not None:
        _bulk(execution_id, new_id, from_step, param, params, status, workflow, since, again, json_)
        return
    if again:
        fail("INVALID_ARGUMENT", "--again goes with --status")
    if execution_id is None or not execution_id:
        fail("INVALID_ARGUMENT", "give the ID to retry, or --status", hint="see `ys retry --help`")
    if workflow is not None or since is not None:
        fail("INVALID_ARGUMENT", "--workflow and --since go with --status")
    body = build_params(param, params)
    if body is not None and not isinstance(body, dict):
        fail("INVALID_ARGUMENT", "--params must be a JSON object", hint="give {...}")
    with client() as c:
        result = c.retry(execution_id, new_id=new_id, from_step=from_step, params=body)
    if json_:
        emit_json(_shown(result))
        return
    sys.stdout.write(result["execution_id"] + "\n")
    sys.stdout.flush()


def _bulk(
    execution_id: str | None,
    new_id: str | None,
    from_step: str | None,
    param: list[str] | None,
    params: str | None,
    status: str,
    workflow: str | None,
    since: str | None,
    again: bool,
    json_: bool,
) -> None:
    given = [
        name
        for name, value in (
            ("ID", execution_id),
            ("--id", new_id),
            ("--from", from_step),
            ("-p", param),
            ("--params", params),
        )
        if value
    ]
    if given:
        fail("INVALID_ARGUMENT", f"--status retries every match: it takes no {given[0]}")
    check_retry_status(status)
    seconds = None if since is None else parse_duration(since, "--since")
    out: list[dict[str, Any]] = []
    errors: list[tuple[str, YsError]] = []
    with client() as c:
        for result in c.retry_matching(
            status=status, workflow=workflow, since=seconds, again=again, errors=errors
        ):
            out.append(_shown(result))
            if not json_:
                sys.stdout.write(result["execution_id"] + "\n")
                sys.stdout.flush()
    if json_:
        emit_json(out)
    for execution_id, exc in errors:  # the others were retried: say which were not, and why
        sys.stderr.write(f"{execution_id} was not retried: {error_line(exc)}\n")
    if errors:
        raise typer.Exit(errors[0][1].exit_code)


def _shown(result: dict[str, Any]) -> dict[str, Any]:
    """What `--json` shows of a retry (docs/design.md, "Workflow options"); every one shown was admitted."""
    return {k: result[k] for k in ("execution_id", "retry_of", "copied_steps")}


def register(app: typer.Typer) -> None:
    add(app, "retry", retry)
