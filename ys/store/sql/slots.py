"""What each schedule slot came to, for people: fired on time, fired late (a catch-up),
skipped or queued behind a running execution, or missed (the catch-up policy or max-late
dropped it). Written in the transaction that fires, so the fires and their account are one
(the schedule's row is locked by it where rows are locked, so ticks of one schedule on
several daemons account for a slot once); the newest SLOTS_KEPT slots of each schedule are
kept. Which rows a tick makes is ys/store/sql/schedule_rows.py's (pure: no SQL)."""

from __future__ import annotations

from typing import Any

from ys.store.base import SLOTS_KEPT as KEEP
from ys.store.base import ScheduleAction
from ys.store.reading import SlotOutcome
from ys.store.sql.schedule_rows import SLOT_COLUMNS as _COLUMNS
from ys.store.sql.schedule_rows import slot_row as _slot
from ys.store.sql.schedule_rows import slot_rows as _rows
from ys.store.sql.schedules import get, tick_tx


def tick_and_record(
    c: Any, name: str, now: float, on_failure: str | None = None
) -> list[ScheduleAction]:
    """`tick_tx`, and what each slot it considered came to, in the same transaction."""
    before = get(c, name, lock=True)
    actions = tick_tx(c, name, now, on_failure)
    after = c.execute("SELECT cursor FROM schedules WHERE name=?", (name,)).fetchone()[0]
    rows = _rows(before, actions, after, now)
    if rows:
        c.executemany(
            f"INSERT INTO schedule_slots ({_COLUMNS}) VALUES (?,?,?,?,?,?,?) "
            "ON CONFLICT (name, slot, outcome) DO UPDATE SET why=excluded.why, "
            "execution_id=excluded.execution_id, at=excluded.at, count=excluded.count",
            rows,
        )
        c.execute(
            "DELETE FROM schedule_slots WHERE name = ? AND slot < (SELECT slot FROM "
            "schedule_slots WHERE name = ? ORDER BY slot DESC LIMIT 1 OFFSET ?)",
            (name, name, KEEP - 1),
        )
    return actions


def recent(
    c: Any,
    name: str | None = None,
    *,
    since: float | None = None,
    outcomes: tuple[str, ...] | None = None,
    limit: int = 20,
) -> list[SlotOutcome]:
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
