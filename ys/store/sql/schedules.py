"""Cron schedules in the store. A fire admits `<schedule>@<slot in UTC>` and moves the
schedule's cursor in one transaction, so a fire repeated after a crash or a catch-up is the
same execution and never a second one. Where every daemon runs a scheduler (PostgreSQL),
ticks of one schedule race: a tick locks the schedule's row first (the second tick then sees
the moved cursor and fires nothing), and a fire inserts its slot's execution with ON
CONFLICT DO NOTHING (a slot is one execution, however many daemons fire it).

The transaction bodies come first; `Schedules`, the client that runs them, last."""

from __future__ import annotations

from typing import Any

from ys import codec, cron
from ys.contract import check_object, check_schedule, check_time, check_workflow_name, slot_id
from ys.errors import InvalidArgument, NotFoundError, YsError
from ys.store.base import Schedule, ScheduleAction
from ys.store.reading import SlotOutcome
from ys.store.records import TERMINAL
from ys.store.sql import pauses
from ys.store.sql.core import Core
from ys.store.sql.executions import admit_new
from ys.store.sql.schedule_rows import SCHEDULE_COLUMNS, SCHEDULE_NAMES, schedule_row


def get(c: Any, name: str, lock: bool = False) -> Schedule:
    row = c.execute(
        f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE name=?"
        + (c.dialect.for_update if lock else ""),
        (name,),
    ).fetchone()
    if row is None:
        raise NotFoundError("NOT_FOUND", f"no schedule named {name!r}")
    return schedule_row(row)


def list_all(c: Any) -> list[Schedule]:
    return [
        schedule_row(r)
        for r in c.execute(f"SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY name")
    ]


def upsert_tx(
    c: Any,
    *,
    name: str,
    workflow: str,
    expr: str,
    tz: str,
    params: Any,
    catch_up: str,
    overlap: str,
    max_late: float | None,
    jitter: float,
    source: str,
    now: float,
    replace: bool,
    restart: bool = False,
) -> Schedule:
    params_json = codec.dumps(params or {}, path="params")
    existing = c.execute(
        "SELECT source, cursor, created_at FROM schedules WHERE name=?" + c.dialect.for_update,
        (name,),
    ).fetchone()
    if existing is not None and not replace:
        raise YsError(
            "FAILED_PRECONDITION",
            f"schedule {name!r} already exists; remove it first (ys schedule rm)",
        )
    cursor = existing[1] if existing is not None else now
    if restart and existing is not None:  # `schedule set`: the new rule's slots start now
        cursor = max(cursor, now)
    expr = cron.anchored(expr, existing[2] if existing is not None else now)  # `--every`
    nxt = cron.next_fire(expr, tz, cursor, jitter, name)
    if nxt is not None:
        check_time(nxt, "the next fire time (the next slot plus jitter)")
    c.execute(
        f"INSERT INTO schedules ({SCHEDULE_COLUMNS}) VALUES ({','.join(['?'] * len(SCHEDULE_NAMES))}) "
        "ON CONFLICT (name) DO UPDATE SET workflow=excluded.workflow, cron=excluded.cron, "
        "tz=excluded.tz, params=excluded.params, catch_up=excluded.catch_up, "
        "max_late=excluded.max_late, overlap=excluded.overlap, jitter=excluded.jitter, "
        "source=excluded.source, next_fire_at=excluded.next_fire_at, cursor=excluded.cursor",
        (
            name,
            workflow,
            expr,
            tz,
            params_json,
            catch_up,
            max_late,
            overlap,
            jitter,
            False,
            source,
            cursor,
            nxt,
            None,
            None,
            None,
            None,
            now,
        ),
    )
    return get(c, name)


def remove_tx(c: Any, name: str, declared_too: bool = False) -> None:
    s = get(c, name, lock=True)
    if s.source == "script" and not declared_too:
        raise YsError(
            "FAILED_PRECONDITION",
            f"schedule {name} is declared by its script and would come back; remove the "
            f"declaration from the script, or `ys schedule pause {name}`",
        )
    c.execute("DELETE FROM schedules WHERE name=?", (name,))


def pause_tx(c: Any, name: str, paused: bool, now: float) -> Schedule:
    s = get(c, name, lock=True)
    if paused == s.paused:
        return s
    cursor = s.cursor if paused else max(s.cursor, now)  # resuming fires nothing missed
    try:
        nxt = None if paused else cron.next_fire(s.cron, s.tz, cursor, s.jitter, name)
    except ValueError as exc:  # stored before the check refused it
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"{exc}; remove schedule {name} and add it again"
        ) from None
    c.execute(
        "UPDATE schedules SET paused=?, cursor=?, next_fire_at=? WHERE name=?",
        (paused, cursor, nxt, name),
    )
    return get(c, name)


def _running(c: Any, execution_id: str | None) -> bool:
    if not execution_id:
        return False
    row = c.execute(
        "SELECT status FROM executions WHERE execution_id=?", (execution_id,)
    ).fetchone()
    return row is not None and row[0] not in TERMINAL


def _fire(c: Any, s: Schedule, slot: float, catch_up: bool, now: float) -> str:
    execution_id = slot_id(s.name, slot)
    context = {"schedule": s.name, "slot": slot_id("", slot)[1:], "catch_up": catch_up}
    if admit_new(
        c, execution_id, s.workflow, codec.dumps(s.params), codec.dumps(context), None, now
    ):
        from ys.crashpoints import crash_point

        crash_point("schedule.in_fire")  # inside the transaction: nothing of it commits
    return execution_id


# At most this many handlers per tick for skipped slots (the newest): a laptop that slept a
# week under an hourly schedule gets a bounded transaction, not 168 notifications.
MAX_SLOT_HANDLERS = 16


def tick_tx(c: Any, name: str, now: float, on_failure: str | None = None) -> list[ScheduleAction]:
    """Fire what is due for one schedule at `now`; returns what was done (for the log). A slot
    skipped for being late, or missed under catch_up=skip, admits `on_failure` in this same
    transaction (ys.store.sql.handlers)."""
    s = get(c, name, lock=True)
    if s.paused:
        return []
    actions: list[ScheduleAction] = []
    last_id = s.last_execution_id
    queued = s.queued_slot
    if queued is not None and not _running(c, last_id):  # a queued fire goes first
        last_id = _fire(c, s, queued, False, now)
        actions.append(ScheduleAction("fired", queued, last_id, queued=True))
        queued = None
    refused = None
    try:
        fires, cursor, skipped = cron.plan_with_skips(
            s.cron,
            s.tz,
            s.cursor,
            now,
            catch_up=s.catch_up,
            max_late=s.max_late,
            jitter=s.jitter,
            name=name,
        )
    except ValueError as exc:  # stored before the check refused it: it stops being due
        fires, cursor, skipped, refused = [], s.cursor, [], str(exc)
    for slot, reason in skipped[-MAX_SLOT_HANDLERS:]:
        from ys.store.sql.handlers import slot_handler_tx

        handler = slot_handler_tx(
            c, on_failure, s.name, slot_id(s.name, slot), slot_id("", slot)[1:], reason, now
        )
        actions.append(ScheduleAction("missed", slot, reason=reason, handler=handler))
    missed_total = sum(1 for f in fires if f.catch_up)
    for f in fires:
        if s.overlap != "allow" and _running(c, last_id):
            if s.overlap == "queue":
                queued = f.slot  # at most one waiting fire: the newest wins
                actions.append(ScheduleAction("queued", f.slot))
            else:
                actions.append(ScheduleAction("skipped", f.slot, why=f"{last_id} is still running"))
            continue
        last_id = _fire(c, s, f.slot, f.catch_up, now)
        actions.append(ScheduleAction("fired", f.slot, last_id, catch_up=f.catch_up))
    nxt = None if refused else cron.next_fire(s.cron, s.tz, cursor, s.jitter, name)
    fired = [a for a in actions if a.action == "fired"]
    c.execute(
        "UPDATE schedules SET cursor=?, next_fire_at=?, last_execution_id=?, "
        "queued_slot=?, last_fire_at=COALESCE(?, last_fire_at), "
        "last_slot=COALESCE(?, last_slot) WHERE name=?",
        (
            cursor,
            nxt,
            last_id,
            queued,
            now if fired else None,
            fired[-1].slot if fired else None,
            name,
        ),
    )
    if missed_total:
        actions.append(ScheduleAction("caught_up", policy=s.catch_up, fired=missed_total))
    if refused:
        actions.append(ScheduleAction("refused", why=refused))
    return actions


class Schedules:
    """The schedule client of one store: each call is one transaction (or one read)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def schedule_add(
        self,
        name: str,
        workflow: str,
        cron_expr: str,
        *,
        tz: str = "local",
        params: Any = None,
        catch_up: str = "once",
        overlap: str = "skip",
        max_late: float | None = None,
        jitter: float = 0.0,
        source: str = "cli",
        replace: bool = False,
        now: float | None = None,
        restart: bool = False,
    ) -> Schedule:
        check_schedule(name, workflow, cron_expr, tz, catch_up, overlap, max_late, jitter)
        check_object(params, "params")  # every fire admits them as an execution's params
        t = self._core.now(now)
        return self._core.write(
            lambda c: upsert_tx(
                c,
                name=name,
                workflow=workflow,
                expr=cron_expr,
                tz=tz,
                params=params,
                catch_up=catch_up,
                overlap=overlap,
                max_late=max_late,
                jitter=jitter,
                source=source,
                now=t,
                replace=replace,
                restart=restart,
            )
        )

    def workflow_pause(self, workflow: str, paused: bool, *, now: float | None = None) -> bool:
        """Pause (or resume) a workflow's deliveries; whether it was paused before."""
        t = self._core.now(now)
        return self._core.write(lambda c: pauses.pause_tx(c, workflow, paused, t))

    def workflow_pauses(self) -> dict[str, float]:
        """The paused workflows and when each was paused."""
        return self._core.read(pauses.paused)

    def schedules(self) -> list[Schedule]:
        return self._core.read(list_all)

    def schedule(self, name: str) -> Schedule:
        return self._core.read(lambda c: get(c, name))

    def schedule_remove(self, name: str, *, declared_too: bool = False) -> None:
        self._core.write(lambda c: remove_tx(c, name, declared_too))

    def schedule_pause(self, name: str, paused: bool, *, now: float | None = None) -> Schedule:
        t = self._core.now(now)
        return self._core.write(lambda c: pause_tx(c, name, paused, t))

    def schedule_tick(
        self, name: str, *, now: float | None = None, on_failure: str | None = None
    ) -> list[ScheduleAction]:
        """Fire what is due for one schedule (admissions, the cursor and each slot's account
        in one transaction); a skipped slot admits `on_failure` in that transaction too."""
        from ys.store.sql.slots import tick_and_record

        t = self._core.now(now)
        if on_failure is not None:
            check_workflow_name(on_failure)
        return self._core.write(lambda c: tick_and_record(c, name, t, on_failure))

    def schedule_slots(
        self,
        name: str | None = None,
        *,
        since: float | None = None,
        outcomes: tuple[str, ...] | None = None,
        limit: int = 20,
    ) -> list[SlotOutcome]:
        """What recent schedule slots came to, newest first."""
        from ys.store.sql.slots import recent

        return self._core.read(
            lambda c: recent(c, name, since=since, outcomes=outcomes, limit=limit)
        )
