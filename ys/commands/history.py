"""`ys history`: an execution's event history, a page at a time or followed as it grows."""

from __future__ import annotations

import shlex
import sys
from typing import Annotated, Any

import typer

from ys.commands._opts import Json, PageToken, add, complete_executions, non_empty
from ys.commands._output import TERMINAL, client, emit_json, emit_json_line, fail

FOLLOW_PAGE = 1000
POLL_SECONDS = 30.0


def _print_event(event: dict[str, Any], json_: bool) -> None:
    if json_:
        emit_json_line(event)
    else:
        from ys.commands import _render

        _render.show(_render.event_line(event))
        sys.stdout.flush()


def follow(c: Any, execution_id: str, token: str | None, limit: int, json_: bool) -> None:
    """Print events as they are appended; return after a terminal event.

    Only page tokens the daemon gave are used: each round re-reads the last page from its
    start (at most `limit` events) and prints the events past the last one printed.
    """
    seen = 0
    while True:
        while True:
            page = c.history(execution_id, limit=limit, page_token=token)
            for event in page["events"]:
                if event["seq"] > seen:
                    seen = event["seq"]
                    _print_event(event, json_)
                    if event["kind"] in TERMINAL:
                        return
            if not page.get("next_page_token"):
                break
            token = page["next_page_token"]
        c.wait_change(execution_id, after=seen, timeout=POLL_SECONDS)


def history(
    execution_id: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]",
            help="The execution's ID (or --all).",
            show_default=False,
            autocompletion=complete_executions,
            callback=non_empty,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            max=1000,
            help="At most this many events per page (default 100).",
            show_default=False,
        ),
    ] = None,
    page_token: PageToken = None,
    follow_: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Keep printing events as they happen, until the execution "
            "finishes. With --json: one JSON event per line.",
        ),
    ] = False,
    all_: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Every execution's events so far, in commit order, as JSON lines with --json "
            "(each with execution_id, workflow and its cursor); with --follow, from now "
            "(or --since, --cursor) for as long as it runs, across daemon restarts.",
        ),
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="DURATION",
            help="With --all: start with the events of this long "
            "ago (90, 10m, 2h, 1d) instead of now.",
            show_default=False,
        ),
    ] = None,
    cursor: Annotated[
        str | None,
        typer.Option(
            "--cursor",
            help="With --all: start after the event that carried this cursor.",
            show_default=False,
        ),
    ] = None,
    json_: Json = False,
) -> None:
    """Show an execution's event history (seq, time, kind, data), a page at a time; or, with
    --all, every execution's events in the order they were committed.

    For people the next page's token is printed on stderr; with --json it is next_page_token.
    `ys history --all --follow --json` streams every event as a JSON line (pipe it to jq or a
    log shipper); to resume, pass the last line's cursor to --cursor.
    """
    if all_ or since is not None or cursor is not None:
        _all(execution_id, all_, since, cursor, follow_, json_)
        return
    if execution_id is None:
        fail("INVALID_ARGUMENT", "give an execution ID, or --all for every execution's events")
    with client() as c:
        if follow_:
            follow(c, execution_id, page_token, limit or FOLLOW_PAGE, json_)
            return
        page = c.history(execution_id, limit=limit, page_token=page_token)
    if json_:
        emit_json(page)
        return
    from ys.commands import _render

    for event in page["events"]:
        _render.show(_render.event_line(event))
    if page.get("next_page_token"):
        size = f" --limit {limit}" if limit else ""
        _render.note(
            f"more: ys history {shlex.quote(execution_id)}{size} "
            f"--page-token {page['next_page_token']}"
        )


def _all(
    execution_id: str | None,
    all_: bool,
    since: str | None,
    cursor: str | None,
    follow_: bool,
    json_: bool,
) -> None:
    if not all_:
        fail("INVALID_ARGUMENT", "--since and --cursor go with --all")
    if execution_id is not None:
        fail("INVALID_ARGUMENT", "--all streams every execution: give no ID with it")
    if since is not None and cursor is not None:
        fail("INVALID_ARGUMENT", "give --since or --cursor, not both")
    from ys.commands._events import stream
    from ys.durations import parse_duration

    seconds = None if since is None else parse_duration(since, "--since")
    if not follow_ and cursor is None and seconds is None:
        cursor = "0"  # every event so far, page by page; following starts at now
    with client() as c:
        stream(c, cursor, seconds, follow_, json_)


def register(app: typer.Typer) -> None:
    add(app, "history", history)
