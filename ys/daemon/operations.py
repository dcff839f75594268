"""What an operator asks of executions and schedules (cancel, wake, retry, pause and resume),
each written once: its checks, its store call, its metrics and whom it tells. The API's routes
(`ys cancel`, `ys wake`, `ys retry`, `ys schedule pause|resume`) and the dashboard's buttons
(ys.ui.actions) are thin adapters over these, so the two cannot drift apart.

Each takes the daemon's parts; store calls run off the event loop (the hub's thread pool).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from ys.errors import NotFoundError, YsError
from ys.store.protocols import AdmissionContext

T = TypeVar("T")

if TYPE_CHECKING:
    from ys.daemon.api_requests import ScheduleSet
    from ys.daemon.parts import DaemonParts
    from ys.store.protocols import Record, Retry, Schedule


async def load(d: DaemonParts, execution_id: str) -> Record:
    """The execution's record; EXECUTION_NOT_FOUND when there is none."""
    record = await d.hub.call(d.store.get, execution_id)
    if record is None:
        raise NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
    return record


async def known_workflow(d: DaemonParts, name: str) -> None:
    """WORKFLOW_NOT_FOUND with the closest names, after one more look at the folder."""
    reg = d.registry
    # Exactly the name: `backup.sh` finds a script only for what older ys versions stored.
    if reg.workflows.get(name) is None and isinstance(name, str):
        await reg.current(name)  # any file of that name the watcher has not reported yet
    else:
        await reg.fresh(name)  # an edit the watcher has not reported yet: what is admitted
    if reg.workflows.get(name) is None:
        close = difflib.get_close_matches(str(name), list(reg.workflows), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; scripts go in {reg.folder}"
        raise NotFoundError(
            "WORKFLOW_NOT_FOUND", f"no workflow named {name!r}{hint}", suggestions=close
        )


@dataclass(frozen=True)
class Cancelled:
    changed: bool  # whether this request changed anything (False: ended, or asked before)
    record: Record  # the execution after it


async def cancel(d: DaemonParts, execution_id: str, *, at_once: bool = False) -> Cancelled:
    """Request the execution's cancellation (it stops at its next step; running workers get
    a grace period), or with `at_once` end it `cancelled` now and kill its worker here."""
    changed = await d.hub.call(d.store.cancel, execution_id, at_once=at_once)
    record = await load(d, execution_id)
    d.hub.notify(execution_id, may_end=True)
    if at_once:
        d.dispatcher.ended_elsewhere(execution_id)  # killed at once, if it runs here
    if changed:
        d.dispatcher.cancels_requested()
    d.dispatcher.poke()
    return Cancelled(changed, record)


async def wake(d: DaemonParts, execution_id: str) -> str:
    """Make a waiting execution due now: "requested", or "ignored" when it has ended."""
    status: str = await d.hub.call(d.store.request_wake, execution_id)
    d.dispatcher.poke()
    return status


async def retry(
    d: DaemonParts,
    execution_id: str,
    *,
    new_id: str | None = None,
    from_step: str | None = None,
    params: Any = None,
    again: bool = True,
    if_status: str | None = None,
) -> Retry:
    """A new execution of a terminal one (one store transaction), admitted only while its
    workflow exists, and counted as an admission by retry. `if_status`: only if the original
    ended so (FAILED_PRECONDITION otherwise); `again=False`: an original already retried
    gets its newest retry back, and nothing is admitted."""
    original = await load(d, execution_id)
    if if_status is not None and original.status != if_status:
        raise YsError(  # terminal statuses never change: no race to lose
            "FAILED_PRECONDITION",
            f"{original.execution_id} is {original.status}, not {if_status}",
        )
    await known_workflow(d, original.workflow)
    result = await d.hub.call(
        d.store.retry,
        original.execution_id,
        new_id=new_id,
        from_step=from_step,
        params=params,
        again=again,
    )
    if result.started:
        d.metrics.admissions.labels("retry").inc()
        d.dispatcher.poke()
    return result


async def pause_schedule(d: DaemonParts, name: str, paused: bool) -> Schedule:
    """Pause or resume the schedule; a resumed one fires from its next slot (the scheduler
    is told), not what passed while it was paused."""
    s: Schedule = await d.hub.call(d.store.schedule_pause, name, paused)
    if not paused:
        d.scheduler.poke()
    return s


async def set_schedule(d: DaemonParts, name: str, changes: ScheduleSet) -> Schedule:
    """Change a schedule in place: its fired executions stay, its next slot follows the new
    rule (slots before now under the new rule never fire). One a script declares is changed in
    its script (FAILED_PRECONDITION)."""
    s: Schedule = await d.hub.call(d.store.schedule, name)
    if s.source == "script":
        raise YsError(
            "FAILED_PRECONDITION",
            f"schedule {name} is declared by its script; change the declaration there",
        )

    def pick(new: T | None, old: T) -> T:
        return old if new is None else new

    out: Schedule = await d.hub.call(
        d.store.schedule_add,
        name,
        s.workflow,
        changes.rule or s.cron,
        replace=True,
        restart=True,
        tz=pick(changes.tz, s.tz),
        params=pick(changes.params, s.params),
        catch_up=pick(changes.catch_up, s.catch_up),
        overlap=pick(changes.overlap, s.overlap),
        max_late=pick(changes.max_late, s.max_late),
        jitter=pick(changes.jitter, s.jitter),
    )
    d.scheduler.poke()
    return out


async def run_schedule(d: DaemonParts, name: str) -> str:
    """Fire the schedule now, once, outside its slots: `NAME@manual-<UTC time>` with its
    params and the context {"schedule", "manual": true}; its execution ID."""
    import time

    from ys.contract import slot_id

    s: Schedule = await d.hub.call(d.store.schedule, name)
    await known_workflow(d, s.workflow)
    now = time.time()
    stamp = slot_id("", now)[1:].replace("Z", f".{int(now * 1000) % 1000:03d}Z")
    result = await d.hub.call(
        d.store.admit,
        s.workflow,
        s.params,
        context=AdmissionContext(schedule=name, manual=True),
        execution_id=f"{name}@manual-{stamp}",
    )
    d.metrics.admissions.labels("schedule").inc()
    d.dispatcher.poke()
    return str(result.execution_id)


class WorkflowPaused(TypedDict):
    """The answer of `ys pause` and `ys resume` (docs/API.md)."""

    workflow: str
    paused: bool
    changed: bool  # False: it was so already


async def pause_workflow(d: DaemonParts, name: str, paused: bool) -> WorkflowPaused:
    """Pause or resume a workflow's deliveries, in the store, so every daemon on it honours it
    (its executions are still admitted and wait; running deliveries finish). Resuming makes
    the waiting ones due again: the dispatcher is told."""
    if paused or name not in await d.hub.call(d.store.workflow_pauses):
        await known_workflow(d, name)
    was: bool = await d.hub.call(d.store.workflow_pause, name, paused)
    if not paused:
        d.dispatcher.poke()
    return {"workflow": name, "paused": paused, "changed": was != paused}
