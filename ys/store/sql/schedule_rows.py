"""Schedules' rows, engine-neutral: a schedule row read into its dict, and a tick's actions
turned into the rows of `schedule_slots` (what `ys schedule slots` shows)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ys import codec, cron
from ys.durations import format_duration
from ys.store.base import Schedule, ScheduleAction
from ys.store.reading import SlotOutcome

SCHEDULE_COLUMNS = (
    "name, workflow, cron, tz, params, catch_up, max_late, overlap, jitter, paused, "
    "source, cursor, next_fire_at, last_fire_at, last_slot, last_execution_id, "
    "queued_slot, created_at"
)


SCHEDULE_NAMES = [c.strip() for c in SCHEDULE_COLUMNS.split(",")]


def schedule_row(row: tuple[Any, ...]) -> Schedule:
    out = dict(zip(SCHEDULE_NAMES, row, strict=True))
    out["params"] = codec.decode(out["params"])
    out["paused"] = bool(out["paused"])
    return Schedule(**out)


OUTCOMES = ("fired", "late", "skipped", "queued", "missed")


SLOT_COLUMNS = "name, slot, outcome, why, execution_id, at, count"


def _utc(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def slot_rows(
    s: Schedule, actions: list[ScheduleAction], cursor: float, now: float
) -> list[tuple[Any, ...]]:
    name = s.name
    rows: list[tuple[Any, ...]] = []
    seen: set[float] = set()
    for a in actions:
        kind, slot = a.action, a.slot
        if slot is None or kind == "missed":  # a missed slot's handler: _missed accounts for it
            continue
        seen.add(slot)
        if kind == "fired" and a.catch_up:
            why = (
                f"fired {format_duration(now - slot)} late: the daemon was not running or "
                f"the machine slept (catch-up {s.catch_up})"
            )
            rows.append((name, slot, "late", why, a.execution_id, now, 1))
        elif kind == "fired":
            queued = "fired once the previous execution ended (overlap queue)"
            rows.append(
                (
                    name,
                    slot,
                    "fired",
                    queued if a.queued else None,
                    a.execution_id,
                    now,
                    1,
                )
            )
        elif kind == "skipped":
            rows.append((name, slot, "skipped", f"{a.why} (overlap skip)", None, now, 1))
        elif kind == "queued":
            rows.append(
                (
                    name,
                    slot,
                    "queued",
                    "waits for the running execution to end (overlap queue)",
                    None,
                    now,
                    1,
                )
            )
    rows += _missed(s, seen, cursor, now)
    return rows


def _missed(s: Schedule, seen: set[float], cursor: float, now: float) -> list[tuple[Any, ...]]:
    """Slots the tick passed over without firing, skipping or queueing them: one row per
    reason, on the latest such slot, with how many there were."""
    if cursor <= s.cursor:
        return []
    first_two = cron.slots_after(s.cron, s.tz, s.cursor, 2)
    if len(first_two) < 2 or first_two[1] > cursor:
        passed = first_two[:1]  # one slot was due: the usual tick, no walk needed
    else:
        passed = []
        t = s.cursor
        while len(passed) < cron.MAX_SLOTS:
            nxt = cron.slots_after(s.cron, s.tz, t, 1)
            if not nxt or nxt[0] > cursor:
                break
            passed.append(nxt[0])
            t = nxt[0]
    dropped = [t for t in passed if t not in seen]
    if not dropped:
        return []
    off = cron.jitter_offset(s.name, s.jitter)
    max_late = s.max_late
    too_old = [t for t in dropped if max_late is not None and now - (t + off) > max_late]
    by_policy = [t for t in dropped if t not in too_old]
    rows = []
    for group, rule in (
        (too_old, f"older than max-late {format_duration(max_late or 0)}"),
        (
            by_policy,
            {"skip": "catch-up skip fires none", "once": "catch-up once fires only the latest"}.get(
                s.catch_up, f"catch-up {s.catch_up}"
            ),
        ),
    ):
        if not group:
            continue
        span = _utc(group[0]) if len(group) == 1 else f"{_utc(group[0])} to {_utc(group[-1])}"
        what = "slot" if len(group) == 1 else f"{len(group)} slots"
        why = (
            f"{what} ({span}) missed while the daemon was not running or the machine slept; {rule}"
        )
        rows.append((s.name, group[-1], "missed", why, None, now, len(group)))
    return rows


def slot_row(row: tuple[Any, ...]) -> SlotOutcome:
    name, slot, outcome, why, execution_id, at, count = row
    return SlotOutcome(name, float(slot), outcome, why, execution_id, float(at), int(count))
