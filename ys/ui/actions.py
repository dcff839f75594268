"""What the dashboard's buttons do: the daemon's operations (ys.daemon.operations), the same
functions the API's routes for `ys cancel`, `ys wake`, `ys retry`, `ys schedule
pause|resume` and `ys workflows pause|resume` call, and what happened in a word for the page to say."""

from __future__ import annotations

from typing import Any

from ys.daemon import operations
from ys.errors import InvalidArgument

EXECUTION = ("cancel", "wake", "retry")
SCHEDULE = ("pause", "resume")


def check(what: str, action: str) -> None:
    allowed = EXECUTION if what == "execution" else SCHEDULE  # a workflow's: pause, resume
    if action not in allowed:
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"no action {action!r} on a {what}; use one of {', '.join(allowed)}"
        )


async def on_execution(d: Any, action: str, execution_id: str) -> str:
    """Run the action; returns what happened, for the page to say."""
    if action == "cancel":
        done = await operations.cancel(d, execution_id)
        return "cancel-requested" if done.changed else "cancel-unchanged"
    if action == "wake":
        status = await operations.wake(d, execution_id)
        return "woken" if status == "requested" else "wake-ignored"
    await operations.retry(d, execution_id)
    return "retried"


async def on_schedule(d: Any, action: str, name: str) -> str:
    await operations.pause_schedule(d, name, action == "pause")
    return "paused" if action == "pause" else "resumed"


async def on_workflow(d: Any, action: str, name: str) -> str:
    await operations.pause_workflow(d, name, action == "pause")
    return "paused" if action == "pause" else "resumed"
