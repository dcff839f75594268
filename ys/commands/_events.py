"""`ys history --all`: every execution's events in commit order, as the daemon streams them
(`GET /v1/events`); with `--follow`, for as long as it runs, across daemon restarts.

Each event carries its `cursor`; `--cursor C` starts after it, so a reader that stopped
(or a shipper that saved the last cursor it wrote) resumes with no gap and no repeat."""

from __future__ import annotations

import sys
import time
from typing import Any

from ys.commands._output import emit_json_line
from ys.errors import DaemonUnavailable

POLL_SECONDS = 30.0
RETRY_SECONDS = 0.5  # while the daemon is away (restarting): ask again this often


def _print(event: dict[str, Any], json_: bool) -> None:
    if json_:
        emit_json_line(event)
        return
    from ys.commands import _render

    line = _render.Text(f"{event['execution_id']}  ", style="bold")
    line.append(_render.event_line(event))
    _render.show(line)
    sys.stdout.flush()


def stream(c: Any, cursor: str | None, since: float | None, follow: bool, json_: bool) -> None:
    """Print events after `cursor` (else from `since` seconds ago, else from now) until there
    are none left, or, with `follow`, until interrupted."""
    away = False
    while True:
        try:
            page = c.events(
                cursor,
                since=since if cursor is None else None,
                wait=POLL_SECONDS if follow else 0.0,
            )
        except DaemonUnavailable:
            if not follow:
                raise
            if not away:
                from ys.commands import _render

                _render.note(
                    "the daemon does not answer; waiting for it (the stream resumes "
                    "where it stopped)"
                )
                away = True
            time.sleep(RETRY_SECONDS)
            continue
        away = False
        for event in page["events"]:
            _print(event, json_)
        cursor = page["cursor"]
        if not follow and not page["events"]:
            return
