"""What each schedule slot came to, for people: fired on time, fired late (a catch-up),
skipped or queued behind a running execution, or missed (the catch-up policy or max-late
dropped it). Written in the transaction that fires, so the fires and their account are one;
the newest SLOTS_KEPT slots of each schedule are kept.

The scheduler's own decisions stay in `schedules.tick_tx`; this module only reads what a tick
did (its actions and how far it moved the cursor) and writes it down.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import Any

from ys import cron
from ys.durations import format_duration
from ys.store.base import SLOTS_KEPT
from ys.store.sqlite.schedules import get, tick_tx

OUTCOMES = ("fired", "late", "skipped", "queued", "missed")
_COLUMNS = "name, slot, outcome, why, execution_id, at, count"


def _utc(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def tick_and_record(
    c: sqlite3.Connection, name: str, now: float, on_failure: str | None = None
) -> list[dict[str, Any]]:
    """`tick_tx`, and what each slot it considered came to, in the same transaction."""
    before = get(c, name)
    actions = tick_tx(c, name, now, on_failure)
    after = c.execute("SELECT cursor FROM schedules WHERE name=?", (name,)).fetchone()[0]
    rows = _rows(before, actions, after, now)
    if rows:
        c.executemany(
            f"INSERT OR REPLACE INTO schedule_slots ({_COLUMNS}) VALUES (?,?,?,?,?,?,?)", rows
        )
        c.execute(
            "DELETE FROM schedule_slots WHERE name = ? AND slot < (SELECT slot FROM "
            "schedule_slots WHERE name = ? ORDER BY slot DESC LIMIT 1 OFFSET ?)",
            (name, name, SLOTS_KEPT - 1),
        )
    return actions


def _rows(
    s: dict[str, Any], actions: list[dict[str, Any]], cursor: float, now: float
) -> list[tuple[Any, ...]]:
    name = s["name"]
    rows: list[tuple[Any, ...]] = []
    seen: set[float] = set()
    for a in actions:
        kind, slot = a["action"], a.get("slot")
        if slot is None or kind == "missed":  # a missed slot's handler: _missed accounts for it
            continue
        seen.add(slot)
        if kind == "fired" and a.get("catch_up"):
            why = (
                f"fired {format_duration(now - slot)} late: the daemon was not running or "
                f"the machine slept (catch-up {s['catch_up']})"
            )
            rows.append((name, slot, "late", why, a["execution_id"], now, 1))
        elif kind == "fired":
            queued = "fired once the previous execution ended (overlap queue)"
            rows.append(
                (
                    name,
                    slot,
                    "fired",
                    queued if a.get("queued") else None,
                    a["execution_id"],
                    now,
                    1,
                )
            )
        elif kind == "skipped":
            rows.append((name, slot, "skipped", f"{a['why']} (overlap skip)", None, now, 1))
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


def _missed(
    s: dict[str, Any], seen: set[float], cursor: float, now: float
) -> list[tuple[Any, ...]]:
    """Slots the tick passed over without firing, skipping or queueing them: one row per
    reason, on the latest such slot, with how many there were."""
    if cursor <= s["cursor"]:
        return []
    first_two = cron.slots_after(s["cron"], s["tz"], s["cursor"], 2)
    if len(first_two) < 2 or first_two[1] > cursor:
        passed = first_two[:1]  # one slot was due: the usual tick, no walk needed
    else:
        passed = []
        t = s["cursor"]
        while len(passed) < cron.MAX_SLOTS:
            nxt = cron.slots_after(s["cron"], s["tz"], t, 1)
            if not nxt or nxt[0] > cursor:
                break
            passed.append(nxt[0])
            t = nxt[0]
    dropped = [t for t in passed if t not in seen]
    if not dropped:
        return []
    off = cron.jitter_offset(s["name"], s["jitter"])
    max_late = s["max_late"]
    too_old = [t for t in dropped if max_late is not None and now - (t + off) > max_late]
    by_policy = [t for t in dropped if t not in too_old]
    rows = []
    for group, rule in (
        (too_old, f"older than max-late {format_duration(max_late or 0)}"),
        (
            by_policy,
            {"skip": "catch-up skip fires none", "once": "catch-up once fires only the latest"}.get(
                s["catch_up"], f"catch-up {s['catch_up']}"
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
        rows.append((s["name"], group[-1], "missed", why, None, now, len(group)))
    return rows


def _slot(row: tuple[Any, ...]) -> dict[str, Any]:
    return dict(
        zip(("name", "slot", "outcome", "why", "execution_id", "at", "count"), row, strict=True)
    )


def recent(
    c: sqlite3.Connection,
    name: str | None = None,
    *,
    since: float | None = None,
    outcomes: tuple[str, ...] | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """Slots newest first: one schedule's, or every schedule's since `since`."""
    where: list[str] = []
    args: list[Any] = []
    if name is not None:
        where.append("name = ?")
        args.append(name)
    if since is not None:
        where.append("at >= ?")
        args.append(since)
    if outcomes:
        where.append(f"outcome IN ({','.join('?' * len(outcomes))})")
        args.extend(outcomes)
    sql = f"SELECT {_COLUMNS} FROM schedule_slots"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY " + ("slot" if name is not None else "at") + " DESC LIMIT ?"
    return [_slot(r) for r in c.execute(sql, (*args, limit)).fetchall()]
