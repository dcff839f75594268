"""The JSON shapes of docs/API.md, built from store values. Times are ISO 8601 UTC with ms."""

from __future__ import annotations

import datetime as dt

from ys import codec
from ys.cron import interval, zone_name
from ys.daemon.shapes import (
    BucketJson,
    ChildJson,
    DatabaseJson,
    DescribeJson,
    EffectJson,
    HistoryEventJson,
    HourJson,
    PastDeliveryJson,
    RecordJson,
    ScheduleJson,
    SlotHistoryJson,
    SlotJson,
    StepJson,
    ValueWaiterJson,
    WaitJson,
)
from ys.durations import MAX_TIME, MIN_TIME
from ys.store.protocols import (
    ActivityBucket,
    ConcurrencyWait,
    DatabaseInfo,
    Description,
    Effect,
    Event,
    FailedAttempt,
    HistoryEvent,
    HourDurations,
    PastDelivery,
    Record,
    Schedule,
    SlotHistory,
    SlotOutcome,
    StepRecord,
    StoreWait,
    ValueWaiter,
    Wait,
)


def iso(t: float | None) -> str | None:
    """Never raises: a stored time outside 1970..9999 (written before every time was checked)
    renders at the nearer end of that range, so one bad row cannot fail every read."""
    if t is None or t != t:  # NaN: SQLite stores it as NULL anyway
        return None
    if t >= MAX_TIME:
        return "9999-12-31T23:59:59.999Z"
    d = dt.datetime.fromtimestamp(max(t, MIN_TIME), tz=dt.UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"


plain = codec.plain


def record(r: Record) -> RecordJson:
    return {
        "execution_id": r.execution_id,
        "workflow": r.workflow,
        "status": r.status,
        "params": plain(codec.decode(r.params_json)) if r.params_json else None,
        "context": plain(codec.decode(r.context_json)) if r.context_json else {},
        "outcome": r.outcome.to_json() if r.outcome else None,
        "admitted_at": iso(r.admitted_at),
        "updated_at": iso(r.updated_at),
        "due_at": iso(r.due_at),
        "attempts": r.attempts,
        "parent": r.parent.to_json() if r.parent else None,
        "cancel_requested": r.cancel_requested,
        "script_sha256": r.script_sha256,
        "tags": dict(r.tags),
        "retry_of": r.retry_of,
        "retried_by": r.retried_by,
    }


def step(s: StepRecord, failed: list[FailedAttempt] | None = None) -> StepJson:
    """A step as describe shows it, with its failed attempts (from the history), oldest first."""
    out: StepJson = {
        "key": s.key,
        "kind": s.kind,
        "status": s.status,
        "attempts": s.attempts,
        "wake_at": iso(s.wake_at),
        "updated_at": iso(s.updated_at),
        "failed_attempts": [
            {"attempt": f.attempt, "at": iso(f.at), "error": f.error} for f in failed or []
        ],
    }
    if s.value is not None:
        out["value"] = plain(codec.decode(s.value))
    return out


def describe(d: Description) -> DescribeJson:
    return DescribeJson(
        **record(d.record),
        history_length=d.record.history_length,
        history_bytes=d.history_bytes,
        lease_expires_at=iso(d.lease_expires_at),
        steps=[step(s, d.failed_attempts.get(s.key)) for s in d.steps],
        children=[child(c) for c in d.children],
        effects=[],
        retries=list(d.retries),
        deliveries=[past_delivery(dlv) for dlv in d.deliveries],
    )


def child(c: Record) -> ChildJson:
    """A child execution as describe lists it."""
    return {
        "execution_id": c.execution_id,
        "workflow": c.workflow,
        "status": c.status,
        "step_key": c.parent.step_key if c.parent else None,
        "detached": c.parent.detached if c.parent else False,
    }


def effect(e: Effect) -> EffectJson:
    out: EffectJson = {
        "effect_id": e.effect_id,
        "operation": e.operation,
        "input": plain(e.input),
        "status": e.status,
        "result": plain(e.result),
        "created_at": iso(e.created_at),
        "settled_at": iso(e.settled_at),
        "conflicts": [
            {
                "result": plain(c.result),
                "conflicting_result": plain(c.conflicting_result),
                "at": iso(c.at),
            }
            for c in e.conflicts
        ],
    }
    if e.began_by is not None:
        out["began_by"] = [
            {"execution_id": b.execution_id, "step_key": b.step_key, "at": iso(b.at)}
            for b in e.began_by
        ]
    if e.waiters is not None:
        out["waiters"] = [
            {"execution_id": w.execution_id, "step_key": w.step_key, "wake_at": iso(w.wake_at)}
            for w in e.waiters
        ]
    return out


def schedule(s: Schedule) -> ScheduleJson:
    return {
        "name": s.name,
        "workflow": s.workflow,
        "cron": None if interval(s.cron) else s.cron,
        "every": iv[0] if (iv := interval(s.cron)) else None,
        "tz": zone_name(s.tz),  # a row stored as `local` by an older ys: the zone it fires in
        "params": plain(s.params),
        "catch_up": s.catch_up,
        "overlap": s.overlap,
        "max_late": s.max_late,
        "jitter": s.jitter,
        "paused": s.paused,
        "source": s.source,
        "next_fire_at": None if s.paused else iso(s.next_fire_at),
        "last_fire_at": iso(s.last_fire_at),
        "last_execution_id": s.last_execution_id,
        "queued": s.queued_slot is not None,
    }


# Times an event's data holds. The store keeps them as epoch seconds (what `apply` folds);
# the API shows them as every other time, in ISO 8601.
EVENT_TIMES = frozenset({"due_at", "retry_at", "wake_at", "timeout_at"})


def event(e: HistoryEvent) -> HistoryEventJson:
    """An item of a history page as the API shows it."""
    return history_event(e.seq, e.event)


def history_event(seq: int, e: Event) -> HistoryEventJson:
    """The `seq`th event of a history as the API shows it."""
    data: dict[str, object] = e.data.to_json()
    if not EVENT_TIMES.isdisjoint(data):
        data = {
            k: iso(v) if k in EVENT_TIMES and isinstance(v, int | float) else v
            for k, v in data.items()
        }
    return {"seq": seq, "at": iso(e.at), "kind": e.kind, "data": data}


# -- the rows read for people to see (ys/store/reading.py) -----------------------------------


def slot(s: SlotOutcome) -> SlotJson:
    return {
        "name": s.name,
        "slot": iso(s.slot),
        "outcome": s.outcome,
        "why": s.why,
        "execution_id": s.execution_id,
        "at": iso(s.at),
        "count": s.count,
    }


def slot_history(h: SlotHistory) -> SlotHistoryJson:
    return {
        "slot": iso(h.slot),
        "outcome": h.outcome,
        "mark": h.mark,
        "why": h.why,
        "execution_id": h.execution_id,
        "status": h.status,
        "at": iso(h.at),
        "count": h.count,
        "lateness": h.lateness,
    }


def bucket(b: ActivityBucket) -> BucketJson:
    return {
        "start": iso(b.start),
        "started": b.started,
        "completed": b.completed,
        "failed": b.failed,
    }


def hour(h: HourDurations) -> HourJson:
    return {"start": iso(h.start), "count": h.count, "p50": h.p50, "p95": h.p95}


def wait(w: Wait) -> WaitJson:
    if isinstance(w, StoreWait):
        return {"kind": "store", "key": w.key, "step_key": w.step_key, "since": iso(w.since)}
    if isinstance(w, ConcurrencyWait):
        return {"kind": "concurrency", "workflow": w.workflow, "slot": w.slot}
    return {
        "kind": "effect",
        "effect_id": w.effect_id,
        "step_key": w.step_key,
        "wake_at": iso(w.wake_at),
    }


def value_waiter(w: ValueWaiter) -> ValueWaiterJson:
    return {
        "key": w.key,
        "execution_id": w.execution_id,
        "step_key": w.step_key,
        "seen_version": w.seen_version,
        "since": iso(w.since),
    }


def past_delivery(p: PastDelivery) -> PastDeliveryJson:
    """A delivery as describe shows it: `detail` and `warnings` only where there are any."""
    out: PastDeliveryJson = {
        "attempt": p.attempt,
        "started_at": iso(p.started_at),
        "ended_at": iso(p.ended_at),
        "outcome": p.outcome,
        "script_sha256": p.script_sha256,
    }
    if p.detail:
        out["detail"] = p.detail
    if p.warnings:
        out["warnings"] = list(p.warnings)
    return out


def database(d: DatabaseInfo) -> DatabaseJson:
    return {"path": d.path, "bytes": d.bytes, "schema_version": d.schema_version}
