"""What each schedule slot came to, on PostgreSQL: written in the tick's transaction (the
schedule's row is locked by it, so ticks of one schedule on several daemons account for a
slot once), the newest KEEP slots of each schedule kept. Which rows a tick makes is
ys/store/slots.py's (pure: no SQL); only the reads and writes are here."""

from __future__ import annotations

from typing import Any

from ys.store.base import SLOTS_KEPT as KEEP
from ys.store.postgres.schedules import get, tick_tx
from ys.store.postgres.shared import slot_row as _slot
from ys.store.postgres.shared import slot_rows as _rows

_COLUMNS = "name, slot, outcome, why, execution_id, at, count"


def tick_and_record(
    c: Any, name: str, now: float, on_failure: str | None = None
) -> list[dict[str, Any]]:
    """`tick_tx`, and what each slot it considered came to, in the same transaction."""
    before = get(c, name, lock=True)
    actions = tick_tx(c, name, now, on_failure)
    after = c.execute("SELECT cursor FROM schedules WHERE name=%s", (name,)).fetchone()[0]
    rows = _rows(before, actions, after, now)
    if rows:
        c.cursor().executemany(
            f"INSERT INTO schedule_slots ({_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s) "
            "ON CONFLICT (name, slot, outcome) DO UPDATE SET why=excluded.why, "
            "execution_id=excluded.execution_id, at=excluded.at, count=excluded.count",
            rows,
        )
        c.execute(
            "DELETE FROM schedule_slots WHERE name = %s AND slot < (SELECT slot FROM "
            "schedule_slots WHERE name = %s ORDER BY slot DESC LIMIT 1 OFFSET %s)",
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
) -> list[dict[str, Any]]:
    """Slots newest first: one schedule's, or every schedule's since `since`."""
    where: list[str] = []
    args: list[Any] = []
    if name is not None:
        where.append("name = %s")
        args.append(name)
    if since is not None:
        where.append("at >= %s")
        args.append(since)
    if outcomes:
        where.append("outcome = ANY(%s)")
        args.append(list(outcomes))
    sql = f"SELECT {_COLUMNS} FROM schedule_slots"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY " + ("slot" if name is not None else "at") + " DESC LIMIT %s"
    return [_slot(r) for r in c.execute(sql, (*args, limit)).fetchall()]
