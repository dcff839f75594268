"""Reading and nudging executions: `get`, `ps`, `list`, `describe`, `wait`, `wake`, `cancel`."""

from __future__ import annotations

import shlex
from enum import StrEnum
from typing import Annotated

import typer

from ys.commands._opts import (
    ExecutionId,
    ExecutionsPerPage,
    Json,
    PageToken,
    SinceFilter,
    TagFilter,
    Timeout,
    WorkflowFilter,
    add,
    complete_executions,
    non_empty,
    since_filter,
    status_filter,
    tag_filter,
    timeout_seconds,
    workflow_filter,
)
from ys.commands._output import TERMINAL, client, emit_json, fail, outcome_exit_code
from ys.durations import format_duration, parse_duration
from ys.errors import ExecutionTimeout

LIST_LIMIT = 50
INSTEAD_OF_ID = "Instead of ID: "
PS_LIMIT = 100  # a page of `ys ps`: each live status's range is read to this many

Wide = Annotated[
    bool,
    typer.Option(
        "--wide",
        help="A wider table: with each execution's parent, the execution it retries, and its tags.",
    ),
]


class Status(StrEnum):
    admitted = "admitted"
    running = "running"
    suspended = "suspended"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


Statuses = Annotated[
    list[Status] | None, status_filter("Only executions with this status (repeat for several).")
]


def get(execution_id: ExecutionId, json_: Json = False) -> None:
    """Show an execution's record: status, outcome, params, times, attempts, parent."""
    with client() as c:
        record = c.get(execution_id)
    if json_:
        emit_json(record)
        return
    from ys.commands import _render

    _render.show_record(record)


def ps(
    limit: ExecutionsPerPage = PS_LIMIT,
    page_token: PageToken = None,
    wide: Wide = False,
    json_: Json = False,
) -> None:
    """List the executions that are not finished: admitted, running or suspended.

    Each with when it is due, its delivery attempt and which process holds its lease; newest
    admitted first, a page at a time (the next page's token is printed on stderr; with --json
    it is next_page_token).
    """
    with client() as c:
        page = c.ps(limit=limit, page_token=page_token)
    if json_:
        emit_json(page)
        return
    from ys.commands import _render

    if not page["executions"]:
        _render.note("nothing is admitted, running or suspended")
        return
    _render.executions(page["executions"], ps=True, wide=wide)
    if page.get("next_page_token"):
        again = ["--wide"] if wide else []
        again += [f"--limit {limit}"] if limit != PS_LIMIT else []
        _render.note(" ".join(["more: ys ps", *again, "--page-token", page["next_page_token"]]))


def list_(
    status: Statuses = None,
    workflow: WorkflowFilter = None,
    parent: Annotated[
        str | None,
        typer.Option(
            "--parent",
            metavar="ID",
            help="Only the children this execution started.",
            autocompletion=complete_executions,
            callback=non_empty,
            show_default=False,
        ),
    ] = None,
    tag: TagFilter = None,
    since: SinceFilter = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            metavar="DUR",
            help="Only executions admitted more than DUR ago.",
            show_default=False,
        ),
    ] = None,
    limit: ExecutionsPerPage = LIST_LIMIT,
    page_token: PageToken = None,
    wide: Wide = False,
    json_: Json = False,
) -> None:
    """List all executions, newest admitted first, a page at a time.

    The filters combine (--tag, --since, --until, --parent, --workflow, --status). For people
    the next page's token is printed on stderr; with --json it is next_page_token.
    """
    from ys.commands._admit import parse_tags

    tags = parse_tags(tag)
    since_s = None if since is None else parse_duration(since, "--since")
    until_s = None if until is None else parse_duration(until, "--until")
    with client() as c:
        page = c.list(
            status=[s.value for s in status or []],
            workflow=workflow,
            parent=parent,
            limit=limit,
            page_token=page_token,
            tags=tags,
            since=since_s,
            until=until_s,
        )
    if json_:
        emit_json(page)
        return
    from ys.commands import _render

    if page["executions"]:
        _render.executions(page["executions"], wide=wide)
    else:
        filtered = status or workflow or parent or tag or since or until
        _render.note("no executions" + (" match" if filtered else " yet"))
    if page.get("next_page_token"):
        again = [f"--status {s.value}" for s in status or []]
        again += [f"--workflow {shlex.quote(workflow)}"] if workflow else []
        again += [f"--parent {shlex.quote(parent)}"] if parent else []
        again += [f"--tag {shlex.quote(t)}" for t in tag or []]
        again += [f"--since {shlex.quote(since)}"] if since else []
        again += [f"--until {shlex.quote(until)}"] if until else []
        again += ["--wide"] if wide else []
        again += [f"--limit {limit}"] if limit != LIST_LIMIT else []
        _render.note(" ".join(["more: ys list", *again, "--page-token", page["next_page_token"]]))


def describe(
    execution_id: ExecutionId,
    timeline: Annotated[
        bool,
        typer.Option(
            "--timeline",
            help="Draw where it spent its time instead: a bar per delivery, step attempt and "
            "child on a time axis (with --json: GET /v1/executions/{id}/timeline).",
        ),
    ] = False,
    json_: Json = False,
) -> None:
    """Show everything about an execution.

    Its record (parent included), history size, pending wake, what it waits on (store keys,
    effects), steps, children, effects and deliveries (attempt, start, end, outcome).
    """
    if timeline:
        with client() as c:
            t = c.timeline(execution_id)
        if json_:
            emit_json(t)
            return
        from ys.commands import _timeline

        _timeline.show(t)
        return
    with client() as c:
        d = c.describe(execution_id)
    if json_:
        emit_json(d)
        return
    from ys.commands import _describe

    _describe.show(d)


def wait(execution_id: ExecutionId, timeout: Timeout = None, json_: Json = False) -> None:
    """Wait until an execution is finished and show its record.

    Exits 0 if it completed, 1 if it failed or was cancelled, 6 if it is still not finished
    after --timeout (with --json the record is printed then too).
    """
    seconds = timeout_seconds(timeout)
    with client(timeout=None) as c:
        try:
            record = c.wait(execution_id, timeout=seconds)
        except ExecutionTimeout as exc:
            record = exc.record  # shown, then refused below (exit 6)
    if json_:
        emit_json(record)
    else:
        from ys.commands import _render

        _render.show_record(record)
    if record["status"] not in TERMINAL:
        fail(
            "TIMEOUT",
            f"{execution_id} is still {record['status']} after {format_duration(seconds or 0)}",
            hint="wait longer with --timeout, or see where "
            f"it is with `ys describe {shlex.quote(execution_id)}`",
        )
    raise typer.Exit(outcome_exit_code(record))


def wake(execution_id: ExecutionId, json_: Json = False) -> None:
    """Make a suspended or waiting execution due now (a finished one is left as it is)."""
    with client() as c:
        result = c.wake(execution_id)
    if json_:
        emit_json({"execution_id": execution_id, **result})
        return
    from ys.commands import _render

    if result.get("status") == "ignored":
        _render.note(f"{execution_id} is finished; nothing to wake")
    else:
        _render.note(f"{execution_id} is due now")


def cancel(
    execution_id: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]",
            help="The execution to cancel (or use --status, --workflow, --since, --tag).",
            autocompletion=complete_executions,
            callback=non_empty,
            show_default=False,
        ),
    ] = None,
    now: Annotated[
        bool,
        typer.Option(
            "--now", help="Kill a running worker at once (no grace) and end it cancelled."
        ),
    ] = False,
    status: Annotated[
        list[str] | None,
        status_filter(
            "Instead of ID: cancel every execution with this status (admitted, running or "
            "suspended; repeatable; default all three when another filter is given)."
        ),
    ] = None,
    workflow: Annotated[str | None, workflow_filter(INSTEAD_OF_ID)] = None,
    since: Annotated[str | None, since_filter(INSTEAD_OF_ID)] = None,
    tag: Annotated[list[str] | None, tag_filter(INSTEAD_OF_ID)] = None,
    json_: Json = False,
) -> None:
    """Request an execution's cancellation: it stops at its next step, as cancelled.

    A running worker that reaches no step within YS_CANCEL_GRACE_SECONDS (10 s) is killed,
    and the execution ends cancelled all the same. With --now it ends cancelled at once and
    its worker (on whichever daemon runs it) is killed with its process group, no grace.

    A suspended or admitted one is cancelled when the daemon next looks at it; a finished one
    is left as it is (exit 0). With --json the record is printed, plus "changed": false when
    nothing changed (it had finished, or its cancellation was already requested).

    With filters instead of an ID (--status, --workflow, --since, --tag; at least one) every
    match that is not finished is cancelled, each as `ys cancel ID` would, and the IDs whose
    cancellation this asked for are printed one per line (--json: {"cancelled": [ID, ...]}).
    """
    filtered = bool(status or workflow is not None or since is not None or tag)
    if filtered:
        _cancel_matching(execution_id, status, workflow, since, tag, now, json_)
        return
    if not execution_id:
        fail(
            "INVALID_ARGUMENT",
            "give the ID to cancel, or filters (--status, --workflow, --since, --tag)",
            hint="see `ys cancel --help`",
        )
    with client() as c:
        record = c.cancel(execution_id, now=now)
    if json_:
        emit_json(record)
        return
    from ys.commands import _render

    if now and record["status"] == "cancelled" and record.get("changed", True):
        _render.note(f"{execution_id} is cancelled; a worker running it was killed")
    elif record.get("changed"):
        _render.note(f"cancellation requested for {execution_id} (it stops at its next step)")
    elif record["status"] in TERMINAL:
        _render.note(f"{execution_id} is already {record['status']}; nothing changed")
    else:
        _render.note(f"cancellation of {execution_id} was already requested; nothing changed")


def _cancel_matching(
    execution_id: str | None,
    status: list[str] | None,
    workflow: str | None,
    since: str | None,
    tag: list[str] | None,
    now: bool,
    json_: bool,
) -> None:
    """`ys cancel --status ...`: every match, one ID per line as each is cancelled."""
    import sys

    from ys.commands._admit import parse_tags
    from ys.commands._output import error_line
    from ys.contract import check_cancel_status
    from ys.errors import YsError

    if execution_id is not None:
        fail("INVALID_ARGUMENT", "give an ID or filters, not both")
    for s in status or []:
        check_cancel_status(s)
    seconds = None if since is None else parse_duration(since, "--since")
    tags = parse_tags(tag)
    errors: list[tuple[str, YsError]] = []
    with client() as c:
        cancelled = c.cancel_matching(
            status=status, workflow=workflow, since=seconds, tags=tags, now=now, errors=errors
        )
    if json_:
        emit_json({"cancelled": cancelled})
    else:
        for cancelled_id in cancelled:
            sys.stdout.write(cancelled_id + "\n")
        sys.stdout.flush()
    for failed_id, exc in errors:  # the others were cancelled: say which were not, and why
        sys.stderr.write(f"{failed_id} was not cancelled: {error_line(exc)}\n")
    if errors:
        raise typer.Exit(errors[0][1].exit_code)


def register(app: typer.Typer) -> None:
    add(app, "get", get)
    add(app, "ps", ps)
    add(app, "list", list_)
    add(app, "describe", describe)
    add(app, "wait", wait)
    add(app, "wake", wake)
    add(app, "cancel", cancel)
