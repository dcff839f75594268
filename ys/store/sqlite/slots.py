"""What each schedule slot came to, for people: fired on time, fired late (a catch-up),
skipped or queued behind a running execution, or missed (the catch-up policy or max-late
dropped it). Written in the transaction that fires, so the fires and their account are one;
the newest SLOTS_KEPT slots of each schedule are kept.

The scheduler's own decisions stay in `schedules.tick_tx`; this module only reads what a tick
did (its actions and how far it moved the cursor) and writes it down.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ys.store.base import SLOTS_KEPT
from ys.store.sql.schedule_rows import SLOT_COLUMNS, slot_row, slot_rows
from ys.store.sqlite.schedules import get, tick_tx


def tick_and_record(
    c: sqlite3.Connection, name: str, now: float, on_failure: str | None = None
) -> list[dict[str, Any]]:
    """`tick_tx`, and what each slot it considered came to, in the same transaction."""
    before = get(c, name)
    actions = tick_tx(c, name, now, on_failure)
    after = c.execute("SELECT cursor FROM schedules WHERE name=?", (name,)).fetchone()[0]
    rows = slot_rows(before, actions, after, now)
    if rows:
        c.executemany(
            f"INSERT OR REPLACE INTO schedule_slots ({SLOT_COLUMNS}) VALUES (?,?,?,?,?,?,?)", rows
        )
        c.execute(
            "DELETE FROM schedule_slots WHERE name = ? AND slot < (SELECT slot FROM "
            "schedule_slots WHERE name = ? ORDER BY slot DESC LIMIT 1 OFFSET ?)",
            (name, name, SLOTS_KEPT - 1),
        )
    return actions


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
    sql = f"SELECT {SLOT_COLUMNS} FROM schedule_slots"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY " + ("slot" if name is not None else "at") + " DESC LIMIT ?"
    return [slot_row(r) for r in c.execute(sql, (*args, limit)).fetchall()]
