"""Claims and leases, on any SQL engine: expired leases released, due executions leased (a
concurrency limit's slot counted first), a lease renewed or released.

A claim takes due rows with the dialect's `skip_locked` (PostgreSQL: FOR UPDATE SKIP LOCKED,
so daemons claiming together take different rows and none waits; SQLite: nothing, its one
writer holds the file), after sweeping expired leases the same way, any daemon's. With
`owned_leases`, a lease names its holder and process (recovery releases only its own).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from ys.store.base import SLOT_ALL, ConcurrencyLimit, Delivery, slot_of
from ys.store.records import CANCEL_REQUESTED, CLAIMED, RELEASED, Event, Record
from ys.store.sql import concurrency
from ys.store.sql.core import DEFAULT_HOLDER
from ys.store.sql.executions import append, lease_lost, load, load_leased, not_found
from ys.store.sql.rows import LIGHT, row_to_record
from ys.store.sql.steps import run_state
from ys.store.sql.versions import delivery_script


def release_expired_tx(
    c: Any, now: float, limit: int | None, holder: str | None = None
) -> list[str]:
    """Release expired leases (only `holder`'s when given), oldest first. SKIP LOCKED: a row
    another daemon is releasing or renewing now is its business."""
    rows = c.execute(
        "SELECT execution_id FROM executions WHERE lease_token IS NOT NULL "
        "AND lease_expires_at <= ?"
        + (" AND lease_holder = ?" if holder else "")
        + " ORDER BY lease_expires_at"
        + (" LIMIT ?" if limit is not None else "")
        + c.dialect.skip_locked,
        (now, *([holder] if holder else []), *([limit] if limit is not None else [])),
    ).fetchall()
    released = []
    for (execution_id,) in rows:
        record = load(c, execution_id, payload=False, lock=True)
        assert record is not None
        append(
            c,
            record,
            [Event(RELEASED, now, {"reason": "lease_expired", "retry_at": now})],
            clear_lease=True,
        )
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
    limits: Mapping[str, ConcurrencyLimit] | None = None,
    heal: bool = False,
) -> list[Delivery]:
    """Sweep expired leases (any daemon's), then lease up to `limit` due executions (with
    `heal`, after making claimable the waiters of groups with free slots: concurrency.heal).
    SKIP LOCKED (where the dialect has it): daemons claiming at once take disjoint rows; a row claimed and
    committed by another since this statement began is re-checked and left out. One of a
    workflow in `limits` is leased only if its slot group has a free slot, counted under the
    group's lock (ys/store/postgres/dialect.py says why that holds across daemons); else
    it is marked waiting and the claim looks further."""
    release_expired_tx(c, now, limit=max(limit, 16))
    if heal and limits:
        concurrency.heal(c, limits)
    out: list[Delivery] = []
    passed = 0
    while len(out) < limit:
        want = limit - len(out)
        rows = c.execute(
            f"SELECT {LIGHT}, deadline_at FROM executions WHERE due_at <= ? "
            "AND lease_token IS NULL AND slot_wait IS NULL "
            "AND (deadline_at IS NULL OR deadline_at > ?) "
            "ORDER BY due_at, execution_id LIMIT ?" + c.dialect.skip_locked,
            (now, now, want),  # past its deadline: never delivered again (`time_out` ends it)
        ).fetchall()
        waited = 0
        for row in rows:  # deadline_at: the last column, after the record's
            record = row_to_record(row)
            delivery = _claim_one(c, record, now, lease, holder, pid, limits, row[-1])
            if delivery is None:
                waited += 1
            else:
                out.append(delivery)
        passed += waited
        if len(rows) < want or not waited or passed >= MAX_PASSED_OVER:
            break
    return out


def claim_new(
    c: Any, execution_id: str, now: float, lease: float, holder: str, pid: int
) -> Delivery:
    """Lease an execution this transaction admitted (its first delivery, claimed in its
    admission's transaction: no concurrency limit applies to its workflow). Nobody else
    sees the row before the commit, so it needs no lock."""
    row = c.execute(
        f"SELECT {LIGHT}, deadline_at FROM executions WHERE execution_id=?", (execution_id,)
    ).fetchone()
    delivery = _claim_one(c, row_to_record(row), now, lease, holder, pid, None, row[-1])
    assert delivery is not None  # without limits a due execution is always leased
    return delivery


def _claim_one(
    c: Any,
    record: Record,
    now: float,
    lease: float,
    holder: str,
    pid: int,
    limits: Mapping[str, ConcurrencyLimit] | None,
    deadline_at: float | None = None,
) -> Delivery | None:
    """Lease one due execution (its row locked), or (its slot group full) mark it waiting
    and return None."""
    assert not record.terminal
    slot = None
    bound = limits.get(record.workflow) if limits else None
    # Cancelled before it ever ran: no workflow code runs (cancel_seen: the dispatcher ends it
    # cancelled at once), so it needs no slot and does not wait for one.
    never_ran = record.cancel_requested and record.attempts == 0
    if bound is not None and not never_ran:
        slot = SLOT_ALL
        if bound.key is not None:
            (params,) = c.execute(
                "SELECT params FROM executions WHERE execution_id=?", (record.execution_id,)
            ).fetchone()
            slot = slot_of(params, bound.key)
        concurrency.lock(c, record.workflow, slot)
        if concurrency.held(c, record.workflow, slot) >= bound.n:
            concurrency.wait(c, record.execution_id, slot)
            return None
    token = secrets.token_hex(16)
    expires = now + lease
    claim: dict[str, Any] = {"attempt": record.attempts + 1}
    if c.dialect.owned_leases and holder != DEFAULT_HOLDER:
        # which daemon ran this attempt: `ys logs` on another box names it when the end of
        # the attempt's log never reached the database (that daemon was killed)
        claim["daemon_id"] = holder
    script, pinned = delivery_script(c, record)
    if script is not None:
        claim["script_sha256"] = script
    record = append(c, record, [Event(CLAIMED, now, claim)])
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
        deadline_at=deadline_at,
        state=run_state(c, record.execution_id, "?"),
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
    cur = c.execute(
        "UPDATE executions SET lease_expires_at=? WHERE execution_id=? AND lease_token=? "
        "AND lease_expires_at > ?",
        (expires, execution_id, token, now),
    )
    if cur.rowcount != 1:
        exists = c.execute(
            "SELECT 1 FROM executions WHERE execution_id=?", (execution_id,)
        ).fetchone()
        raise lease_lost(execution_id) if exists else not_found(execution_id)
    return expires


def release_tx(c: Any, execution_id: str, token: str, now: float, data: dict[str, Any]) -> None:
    record = load_leased(c, execution_id, token, now)
    append(c, record, [Event(RELEASED, now, data)], token=token, clear_lease=True)
