"""The effect client: effect records keyed by effect ID, with immutable operation and
input, settled once; waiters woken through their execution records in the settling
transaction. Begin, settle and wait are not fenced. Effect records are never pruned.

Where two daemons could race, the effect's row is locked (the dialect's clauses): a begin
inserts with ON CONFLICT DO NOTHING (two first begins make one record) and then reads it
FOR SHARE; a settle and a wait lock it FOR UPDATE, so a wait that comes second sees the
settlement, and one that comes first is found by the settle.
"""

from __future__ import annotations

from typing import Any

from ys import codec
from ys.contract import check_effect_request, check_time
from ys.errors import EffectInvariantError, InvalidArgument, WorkflowEffectError, YsError
from ys.store.base import Effect, EffectBegin, EffectConflict, EffectState, EffectWaiter
from ys.store.sql.core import Core
from ys.store.sql.executions import request_wake_tx

_COLUMNS = "effect_id, operation, input, status, result, created_at, settled_at"


def begin_tx(
    c: Any,
    operation: str,
    effect_id: str,
    input_json: str,
    execution_id: str,
    step_key: str,
    now: float,
) -> EffectState:
    created = (
        c.execute(
            "INSERT INTO effects (effect_id, operation, input, status, created_at) "
            "VALUES (?,?,?,'pending',?) ON CONFLICT (effect_id) DO NOTHING",
            (effect_id, operation, input_json, now),
        ).rowcount
        == 1
    )
    if created:
        state = EffectState("new")
    else:
        row = c.execute(
            "SELECT operation, input, status, result FROM effects WHERE effect_id=?"
            + c.dialect.for_share,
            (effect_id,),
        ).fetchone()
        if row[0] != operation or row[1] != input_json:
            what = "operation" if row[0] != operation else "input"
            raise WorkflowEffectError(
                "EFFECT_REQUEST_MISMATCH",
                f"effect {effect_id!r} exists with another {what} ({row[0]}); an effect's "
                "operation and input never change",
            )
        state = EffectState("settled", row[3]) if row[2] == "settled" else EffectState("pending")
    c.execute(
        "INSERT INTO effect_begins (effect_id, execution_id, step_key, at) "
        "VALUES (?,?,?,?) ON CONFLICT DO NOTHING",
        (effect_id, execution_id, step_key, now),
    )
    return state


def settle_tx(c: Any, operation: str, effect_id: str, result_json: str, now: float) -> EffectState:
    row = c.execute(
        "SELECT operation, status, result FROM effects WHERE effect_id=?" + c.dialect.for_update,
        (effect_id,),
    ).fetchone()
    if row is None:
        raise EffectInvariantError(
            "EFFECT_RUNTIME_INVARIANT", f"settle of effect {effect_id!r}, which was never begun"
        )
    if row[0] != operation:
        raise EffectInvariantError(
            "EFFECT_RUNTIME_INVARIANT",
            f"settle of effect {effect_id!r} as {operation}, but it is {row[0]}",
        )
    if row[1] == "settled":
        if row[2] == result_json:
            return EffectState("settled", row[2])
        c.execute(
            "INSERT INTO effect_conflicts (effect_id, result, conflicting_result, at) "
            "VALUES (?,?,?,?)",
            (effect_id, row[2], result_json, now),
        )
        return EffectState("conflict", row[2], result_json)
    c.execute(
        "UPDATE effects SET status='settled', result=?, settled_at=? WHERE effect_id=?",
        (result_json, now, effect_id),
    )
    waiters = c.execute(
        "DELETE FROM effect_waiters WHERE effect_id=? RETURNING execution_id", (effect_id,)
    ).fetchall()
    for execution_id in sorted({r[0] for r in waiters}):
        try:
            request_wake_tx(c, execution_id, now, now, reason=f"effect {effect_id} settled")
        except YsError:
            pass  # the waiter's record is gone (pruned): there is nothing left to wake
    return EffectState("settled", result_json)


def wait_tx(
    c: Any, effect_id: str, execution_id: str, step_key: str, wake_at: float, now: float
) -> float:
    """Register a waiter and request its wake, together. A repeat while the first wake is
    still ahead returns that wake; once it has come, a new wait registers a new wake."""
    row = c.execute(
        "SELECT status FROM effects WHERE effect_id=?" + c.dialect.for_update, (effect_id,)
    ).fetchone()
    if row is None:
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"effect_id {effect_id!r} names no effect: begin it before waiting on it",
        )
    if row[0] == "settled":
        request_wake_tx(c, execution_id, now, now, reason=f"effect {effect_id} is settled")
        return now
    first = c.execute(
        "SELECT wake_at FROM effect_waiters WHERE effect_id=? AND execution_id=? AND step_key=?",
        (effect_id, execution_id, step_key),
    ).fetchone()
    if first is not None and first[0] > now:
        return float(first[0])
    c.execute(
        "INSERT INTO effect_waiters (effect_id, execution_id, step_key, wake_at, registered_at) "
        "VALUES (?,?,?,?,?) ON CONFLICT (effect_id, execution_id, step_key) DO UPDATE SET "
        "wake_at=excluded.wake_at, registered_at=excluded.registered_at",
        (effect_id, execution_id, step_key, wake_at, now),
    )
    request_wake_tx(c, execution_id, wake_at, now, reason=f"effect {effect_id} lookup")
    return wake_at


def _effect(c: Any, row: tuple[Any, ...], full: bool) -> Effect:
    effect_id = row[0]
    conflicts = tuple(
        EffectConflict(codec.decode(r[0]), codec.decode(r[1]), r[2])
        for r in c.execute(
            "SELECT result, conflicting_result, at FROM effect_conflicts WHERE effect_id=? "
            "ORDER BY id",
            (effect_id,),
        ).fetchall()
    )
    began_by = waiters = None
    if full:
        began_by = tuple(
            EffectBegin(*r)
            for r in c.execute(
                "SELECT execution_id, step_key, at FROM effect_begins WHERE effect_id=? "
                "ORDER BY at",
                (effect_id,),
            ).fetchall()
        )
        waiters = tuple(
            EffectWaiter(*r)
            for r in c.execute(
                "SELECT execution_id, step_key, wake_at FROM effect_waiters WHERE effect_id=?",
                (effect_id,),
            ).fetchall()
        )
    return Effect(
        effect_id=effect_id,
        operation=row[1],
        input=codec.decode(row[2]),
        status=row[3],
        result=codec.decode(row[4]) if row[4] is not None else None,
        created_at=row[5],
        settled_at=row[6],
        conflicts=conflicts,
        began_by=began_by,
        waiters=waiters,
    )


def describe_effect(c: Any, effect_id: str) -> Effect | None:
    row = c.execute(f"SELECT {_COLUMNS} FROM effects WHERE effect_id=?", (effect_id,)).fetchone()
    return None if row is None else _effect(c, row, full=True)


def list_effects(
    c: Any, status: str | None = None, execution_id: str | None = None, limit: int = 1000
) -> list[Effect]:
    where: list[str] = []
    args: list[Any] = []
    if status == "conflict":
        where.append("effect_id IN (SELECT effect_id FROM effect_conflicts)")
    elif status:
        where.append("status=?")
        args.append(status)
    if execution_id:
        where.append(
            "effect_id IN (SELECT effect_id FROM effect_begins WHERE execution_id=?"
            " UNION SELECT effect_id FROM effect_waiters WHERE execution_id=?)"
        )
        args += [execution_id, execution_id]
    sql = f"SELECT {_COLUMNS} FROM effects" + (" WHERE " + " AND ".join(where) if where else "")
    sql += " ORDER BY created_at, effect_id LIMIT ?"
    args.append(limit)
    return [_effect(c, r, full=False) for r in c.execute(sql, args).fetchall()]


class Effects:
    """The effect client of one store: each call is one transaction (or one read)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def effect_begin(
        self,
        operation: str,
        effect_id: str,
        input: Any,
        execution_id: str,
        step_key: str,
        *,
        now: float | None = None,
    ) -> EffectState:
        input_json = check_effect_request(effect_id, operation, input)
        t = self._core.now(now)
        return self._core.write(
            lambda c: begin_tx(c, operation, effect_id, input_json, execution_id, step_key, t)
        )

    def effect_settle(
        self, operation: str, effect_id: str, result_json: str, *, now: float | None = None
    ) -> EffectState:
        result_json = codec.dumps(codec.decode(result_json))  # compared in canonical form
        t = self._core.now(now)
        return self._core.write(lambda c: settle_tx(c, operation, effect_id, result_json, t))

    def effect_wait(
        self,
        effect_id: str,
        execution_id: str,
        step_key: str,
        wake_at: float,
        *,
        now: float | None = None,
    ) -> float:
        wake_at = check_time(wake_at, "wake_at")
        t = self._core.now(now)
        return self._core.write(lambda c: wait_tx(c, effect_id, execution_id, step_key, wake_at, t))

    def effect(self, effect_id: str) -> Effect | None:
        return self._core.snapshot(lambda c: describe_effect(c, effect_id))

    def effects(self, status: str | None = None, execution_id: str | None = None) -> list[Effect]:
        return self._core.snapshot(lambda c: list_effects(c, status, execution_id))
