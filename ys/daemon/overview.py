"""What runs, what is due, what waits, what failed lately, which schedule slots were late or
skipped, and the daemon's health: the dashboard's Now page and `ys top`, as JSON
(`GET /v1/overview`). Every read is bounded (the store's OverviewClient)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ys import __version__
from ys.daemon import views
from ys.daemon.shapes import BucketJson, HourJson, OverviewJson, RecordJson, RunningJson
from ys.store.protocols import Record, RunningExecution

if TYPE_CHECKING:
    from ys.daemon.parts import DaemonParts

FAILURE_WINDOW = 86400.0
LIST = 10  # items per section


def _running(d: DaemonParts, items: list[RunningExecution]) -> list[RunningJson]:
    out = []
    for it in items:
        r = d.dispatcher.running.get(it.record.execution_id)
        rec = RunningJson(
            **views.record(it.record),
            claimed_at=views.iso(it.claimed_at),
            lease_expires_at=views.iso(it.lease_expires_at),
            pid=r.proc.pid if r is not None and r.proc is not None else None,
        )
        out.append(rec)
    return out


def _waiting(d: DaemonParts, items: list[Record]) -> list[RecordJson]:
    out = []
    for r in items:
        rec = views.record(r)
        rec["waiting_on"] = [views.wait(w) for w in d.store.waits(r.execution_id)]
        out.append(rec)
    return out


def _script_waits(d: DaemonParts, *groups: Sequence[RecordJson]) -> None:
    """Mark those that wait for their script (broken or missing) with why (`waiting_for`)."""
    records = {r["execution_id"]: r for g in groups for r in g}
    for execution_id, detail in d.store.script_waits(list(records)).items():
        r = records[execution_id]
        r["waiting_for"] = d.registry.waiting_for(r["workflow"], detail)


def _paused(pauses: dict[str, float], due: list[RecordJson]) -> None:
    """Mark the due executions of a paused workflow (`ys workflows pause`): nothing claims
    them until it is resumed, whatever else they wait for."""
    for r in due:
        if r["workflow"] in pauses:
            r["waiting_for"] = "workflow paused"


def activity(d: DaemonParts, t: float, span: float, bucket: float) -> list[BucketJson]:
    """Executions started, completed and failed per bucket over the last `span` seconds (the
    last bucket holds `t`)."""
    until = (t // bucket + 1) * bucket
    return [views.bucket(b) for b in d.store.activity(until - span, until, bucket)]


def durations(d: DaemonParts, t: float) -> list[HourJson]:
    """Deliveries that ended per hour over the last 24 hours with their p50 and p95 in
    seconds (the last hour holds `t`)."""
    until = (t // 3600 + 1) * 3600
    return [views.hour(h) for h in d.store.delivery_durations(until - FAILURE_WINDOW, until)]


def read(d: DaemonParts, now: float | None = None) -> OverviewJson:
    """The overview, read in the calling thread (the hub's pool)."""
    store = d.store
    t = store.clock() if now is None else now
    last_gc = store.setting("last_gc_at")
    workflows = list(d.registry.workflows.values())
    due = [views.record(r) for r in store.due(LIST)]
    waiting = _waiting(d, store.list(statuses=["suspended"], limit=LIST).items)
    _script_waits(d, due, waiting)
    _paused(store.workflow_pauses(), due)
    return {
        "now": views.iso(t),
        "daemon": {
            "version": __version__,
            "pid": os.getpid(),
            "started_at": views.iso(d.started_at),
            "uptime_seconds": round(t - d.started_at, 3),
            "concurrency": d.dispatcher.concurrency,
            "database": views.database(store.database()),
            "last_gc_at": views.iso(float(last_gc)) if last_gc else None,
            "workflows": len(workflows),
            "workflow_errors": sum(1 for w in workflows if w.error),
        },
        "counts": {s: store.count_status(s) for s in ("running", "admitted", "suspended")},
        "running": _running(d, store.running(100)),
        "due": due,
        "waiting": waiting,
        "failures": [views.record(r) for r in store.failed_since(t - FAILURE_WINDOW, LIST)],
        "activity": {
            "day": activity(d, t, FAILURE_WINDOW, 600.0),
            "hour": activity(d, t, 3600.0, 60.0),
        },
        "durations": durations(d, t),
        "slots": [
            views.slot(s)
            for s in store.schedule_slots(
                since=t - FAILURE_WINDOW, outcomes=("late", "skipped", "missed"), limit=LIST
            )
        ],
    }
