"""Claims and leases, on any SQL engine: expired leases released, due executions leased (a
concurrency limit's slot counted first), a lease renewed or released.

A claim takes due rows with the dialect's `skip_locked` (PostgreSQL: FOR UPDATE SKIP LOCKED,
so daemons claiming together take different rows and none waits; SQLite: nothing, its one
writer holds the file), after sweeping expired leases the same way, any daemon's. With
`owned_leases`, a lease names its holder and process (recovery releases only its own).
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

from ys.store.base import (
    SLOT_ALL,
    Claimed,
    ConcurrencyLimit,
    Delivery,
    RunState,
    StepRecord,
    slot_of,
)
from ys.store.eventdata import ClaimedData
from ys.store.records import CANCEL_REQUESTED, CLAIMED, RELEASED, Event
from ys.store.sql import concurrency, pauses
from ys.store.sql.core import DEFAULT_HOLDER
from ys.store.sql.executions import append, renew_lease
from ys.store.sql.limits import release_lost_tx
from ys.store.sql.requests import Later
from ys.store.sql.rows import LIGHT, row_to_record
from ys.store.sql.steps import STEP_COLUMNS
from ys.store.sql.versions import pinned_script


def release_expired_tx(
    c: Any, now: float, limit: int | None, holder: str | None = None
) -> list[str]:
    """Release expired leases (only `holder`'s when given), oldest first. SKIP LOCKED: a row
    another daemon is releasing or renewing now is its business."""
    return _release(c, _expired(c, now, limit, holder).fetchall(), now)


def _expired(c: Any, now: float, limit: int | None, holder: str | None = None) -> Any:
    """The expired leases' rows, asked (the cursor: its answer is read by the caller)."""
    return c.execute(
        "SELECT execution_id FROM executions WHERE lease_token IS NOT NULL "
        "AND lease_expires_at <= ?"
        + (" AND lease_holder = ?" if holder else "")
        + " ORDER BY lease_expires_at"
        + (" LIMIT ?" if limit is not None else "")
        + c.dialect.skip_locked,
        (now, *([holder] if holder else []), *([limit] if limit is not None else [])),
    )


def _release(c: Any, rows: list[Any], now: float, ended: list[str] | None = None) -> list[str]:
    """Release these expired leases; those whose release failed their execution (its last
    attempt) are added to `ended`."""
    released = []
    for (execution_id,) in rows:
        # counted toward max_attempts, as any box's
        if release_lost_tx(c, execution_id, now) and ended is not None:
            ended.append(execution_id)
        released.append(execution_id)
    return released


MAX_PASSED_OVER = 1000  # executions one claim may mark waiting for a slot (the rest: next claim)


def claim_due_tx(
    c: Any,
    now: float,
    limit: int,
    lease: float,
    holder: str,
    pid: int,
    heal: bool = False,
) -> Claimed | Later:
    """Sweep expired leases (any daemon's), then lease up to `limit` due executions (with
    `heal`, after making claimable the waiters of groups with free slots: concurrency.heal).
    SKIP LOCKED (where the dialect has it): daemons claiming at once take disjoint rows; a row claimed and
    committed by another since this statement began is re-checked and left out. One of a
    workflow whose current script declares a limit (`scripts.concurrency`, read in the same
    SELECT) is leased only if its slot group has a free slot, counted under the group's lock
    (ys/store/postgres/dialect.py says why that holds across daemons); else it is marked
    waiting and the claim looks further.

    One question (docs/design.md, "On PostgreSQL"): the sweep's and the due rows' SELECTs go
    out together and are answered together; what the sweep released is looked for again (a
    second question, only then). The claimed executions' steps are read with the writes and
    COMMIT (`with_steps`). The executions the sweep failed are the answer's `ended`."""
    expired = _expired(c, now, max(limit, 16))
    ended: list[str] = []
    if heal:
        _release(c, expired.fetchall(), now, ended)
        concurrency.heal(c, now)
        due = _due(c, now, limit)
    else:
        due = _due(c, now, limit)  # asked with the sweep: both answered in one round trip
        if _release(c, expired.fetchall(), now, ended):
            due = _due(c, now, limit)  # those released are due now: asked again
    out: list[Delivery] = []
    passed = 0
    while len(out) < limit:
        want = limit - len(out)
        rows = due.fetchall()
        waited = 0
        for row in rows:
            delivery = _claim_one(c, Claimable(row), now, lease, holder, pid)
            if delivery is None:
                waited += 1
            else:
                out.append(delivery)
        passed += waited
        if len(rows) < want or not waited or passed >= MAX_PASSED_OVER:
            break
        due = _due(c, now, limit - len(out))
    claimed = with_steps(c, out, later=c.dialect.pipelined)
    if isinstance(claimed, Later):
        return Later(lambda: Claimed(claimed.value(), ended))
    return Claimed(claimed, ended)


def _due(c: Any, now: float, want: int) -> Any:
    """Up to `want` due executions' CLAIM_COLUMNS, asked (the cursor)."""
    return c.execute(
        f"SELECT {CLAIM_COLUMNS} FROM executions WHERE due_at <= ? "
        "AND lease_token IS NULL AND slot_wait IS NULL "
        + pauses.SKIP_PAUSED  # a paused workflow's executions wait (ys workflows pause)
        + "AND (deadline_at IS NULL OR deadline_at > ?) "
        "ORDER BY due_at, execution_id LIMIT ?" + c.dialect.skip_locked,
        (now, now, want),  # past its deadline: never delivered again (`time_out` ends it)
    )


# What a claim reads of each due execution in its one SELECT (docs/design.md, "On
# PostgreSQL": one round trip per durable operation): the record, its deadline, what its
# worker starts from and its workflow's current script, with the concurrency limit that
# script declares (docs/design.md, "Workflow options": the newest version's limit applies).
CLAIM_COLUMNS = (
    f"{LIGHT}, deadline_at, params, context, "
    "(SELECT sha256 FROM scripts s WHERE s.workflow = executions.workflow), "
    "(SELECT pin FROM scripts s WHERE s.workflow = executions.workflow), "
    "(SELECT concurrency FROM scripts s WHERE s.workflow = executions.workflow), "
    "(SELECT concurrency_key FROM scripts s WHERE s.workflow = executions.workflow)"
)


class Claimable:
    """One row of CLAIM_COLUMNS."""

    __slots__ = ("record", "deadline_at", "params", "context", "script", "bound")

    def __init__(self, row: Any) -> None:
        self.record = row_to_record(row[:-7])
        self.deadline_at: float | None = row[-7]
        self.params: str = row[-6]
        self.context: str = row[-5]
        self.script: tuple[str | None, bool] = (row[-4], bool(row[-3]))
        self.bound = None if row[-2] is None else ConcurrencyLimit(int(row[-2]), row[-1])


def with_steps(c: Any, deliveries: list[Delivery], later: bool = False) -> Any:
    """The deliveries with the steps their workers start from, read in one statement; with
    `later` (a pipelining writer), a Later: the statement goes out with the writes and
    COMMIT and is read once they are answered, no round trip of its own."""
    if not deliveries:
        return deliveries
    marks = ",".join("?" * len(deliveries))
    cur = c.execute(
        f"SELECT execution_id, {STEP_COLUMNS} FROM steps WHERE execution_id IN ({marks}) "
        "ORDER BY execution_id, first_seq",
        [d.execution_id for d in deliveries],
    )

    def read() -> list[Delivery]:
        steps: dict[str, list[StepRecord]] = {d.execution_id: [] for d in deliveries}
        for row in cur.fetchall():
            steps[row[0]].append(StepRecord(*row[1:]))
        out = []
        for d in deliveries:
            assert d.state is not None
            state = RunState(d.state.params_json, d.state.context_json, steps[d.execution_id])
            out.append(replace(d, state=state))
        return out

    return Later(read) if later else read()


def claim_new(
    c: Any, execution_id: str, now: float, lease: float, holder: str, pid: int
) -> Delivery | None:
    """Lease an execution this transaction admitted (its first delivery, claimed in its
    admission's transaction), or None when its workflow is paused or its recorded limit
    leaves no slot (it waits, as a claim would leave it). Nobody else sees the row before the
    commit. One statement asks for the row and the pause together, and a new execution has
    no steps to read: the admission's one question, this one, then the writes with COMMIT
    (docs/design.md, "On PostgreSQL")."""
    row = c.execute(
        f"SELECT {CLAIM_COLUMNS}, EXISTS (SELECT 1 FROM workflow_pauses p "
        "WHERE p.workflow = executions.workflow) FROM executions WHERE execution_id=?",
        (execution_id,),
    ).fetchone()
    if row[-1]:
        return None  # paused: it waits, as a claim would leave it
    return _claim_one(c, Claimable(row[:-1]), now, lease, holder, pid)  # its steps: none


def _claim_one(
    c: Any,
    due: Claimable,
    now: float,
    lease: float,
    holder: str,
    pid: int,
) -> Delivery | None:
    """Lease one due execution (its row locked), or (its slot group full) mark it waiting
    and return None. Its delivery's steps are read after (`with_steps`)."""
    record = due.record
    assert not record.terminal
    slot = None
    bound = due.bound
    # Cancelled before it ever ran: no workflow code runs (cancel_seen: the dispatcher ends it
    # cancelled at once), so it needs no slot and does not wait for one.
    never_ran = record.cancel_requested and record.attempts == 0
    if bound is not None and not never_ran:
        slot = SLOT_ALL
        if bound.key is not None:
            slot = slot_of(due.params, bound.key)
        concurrency.lock(c, record.workflow, slot)
        if concurrency.held(c, record.workflow, slot, now) >= bound.n:
            concurrency.wait(c, record.execution_id, slot)
            return None
    token = secrets.token_hex(16)
    expires = now + lease
    # which daemon ran this attempt: `ys logs` on another box names it when the end of the
    # attempt's log never reached the database (that daemon was killed)
    by = holder if c.dialect.owned_leases and holder != DEFAULT_HOLDER else None
    script, pinned = pinned_script(record, *due.script)
    claim = ClaimedData(record.attempts + 1, by, script)
    record = append(c, record, [Event(CLAIMED, now, claim)], locked=True)
    if c.dialect.owned_leases:
        c.execute(
            "UPDATE executions SET lease_token=?, lease_expires_at=?, lease_holder=?, "
            "lease_pid=?, slot=? WHERE execution_id=?",
            (token, expires, holder, pid, slot, record.execution_id),
        )
    else:
        c.execute(
            "UPDATE executions SET lease_token=?, lease_expires_at=?, slot=? WHERE execution_id=?",
            (token, expires, slot, record.execution_id),
        )
    seen = (bound is not None and never_ran) or (
        record.cancel_requested and cancel_seen(c, record.execution_id)
    )
    return Delivery(
        record.execution_id,
        token,
        record.attempts,
        expires,
        record.workflow,
        cancel_requested=record.cancel_requested,
        cancel_seen=seen,
        script_sha256=script,
        pinned=pinned,
        deadline_at=due.deadline_at,
        state=RunState(due.params, due.context, []),
    )


def cancel_seen(c: Any, execution_id: str) -> bool:
    """Whether a delivery ended without an outcome after the cancellation was requested (a
    release follows the request): that delivery was told, or was running when it came."""
    row = c.execute(
        "SELECT kind FROM events WHERE execution_id=? AND kind IN (?, ?) ORDER BY seq DESC LIMIT 1",
        (execution_id, CANCEL_REQUESTED, RELEASED),
    ).fetchone()
    return row is not None and row[0] == RELEASED


def renew_tx(c: Any, execution_id: str, token: str, now: float, expires: float) -> float:
    """A heartbeat, fenced in its one statement."""
    return renew_lease(c, execution_id, token, now, expires)
