"""What the dashboard's buttons do: the same store calls, hub notices and pokes as the API's
routes for `ys cancel`, `ys wake` and `ys schedule pause|resume`."""

from __future__ import annotations

from typing import Any

from ys.errors import InvalidArgument

EXECUTION = ("cancel", "wake")  # and "retry", once the store has it
SCHEDULE = ("pause", "resume")


def check(what: str, action: str) -> None:
    allowed = EXECUTION if what == "execution" else SCHEDULE
    if what == "execution" and action == "retry":
        return
    if action not in allowed:
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"no action {action!r} on a {what}; use one of {', '.join(allowed)}"
        )


async def on_execution(api: Any, action: str, execution_id: str) -> str:
    """Run the action; returns what happened, for the page to say."""
    d = api.d
    await api.load(execution_id)  # EXECUTION_NOT_FOUND before anything else
    if action == "cancel":
        changed = await api.call(d.store.cancel, execution_id)
        d.hub.notify(execution_id, may_end=True)
        if changed:
            d.dispatcher.cancels_requested()  # running workers get a grace period
        d.dispatcher.poke()
        return "cancel-requested" if changed else "cancel-unchanged"
    if action == "wake":
        status = await api.call(d.store.request_wake, execution_id)
        d.dispatcher.poke()
        return "woken" if status == "requested" else "wake-ignored"
    retry = getattr(d.store, "retry", None)
    if retry is None:
        raise InvalidArgument("INVALID_ARGUMENT", "retry is not available in this version")
    record = await api.call(d.store.get, execution_id)
    if record is not None:  # an edit the watcher has not reported yet is what the retry runs
        await d.registry.fresh(record.workflow)
    await api.call(retry, execution_id)  # pragma: no cover - appears with `ys retry`
    d.dispatcher.poke()
    return "retried"


async def on_schedule(api: Any, action: str, name: str) -> str:
    d = api.d
    await api.call(d.store.schedule_pause, name, action == "pause")
    if action == "resume":
        d.scheduler.poke()
    return "paused" if action == "pause" else "resumed"
