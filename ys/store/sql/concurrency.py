"""Concurrency limits: the claim's side (`claim_due_tx` counts `held` slots before it leases
an execution of a limited workflow) and the side of a lease that ends (`free`), with the limits read from the workflow's current
script as recorded (`scripts.concurrency`, `concurrency_key`: one limit for every daemon).

A limited execution's lease holds a slot: its row's `slot` names the group (the workflow's
whole, or one value of `params[key]`, `base.slot_of`), counted over leased rows through a
partial index. A due execution whose group is full is marked `slot_wait` and left out of
claims and of `next_due_at` (the due index excludes it) until a lease of its group ends:
that transaction clears the mark of the group's earliest waiter, which the next claim takes
or marks again. Every transaction that counts, takes or frees a group's slots first takes
the group's lock (`lock`: the dialect's; SQLite needs none, one writer holds the file;
ys/store/postgres/dialect.py says why PostgreSQL's makes the count exact across daemons).

An execution ended without its worker (cancelled at once, timed out: its lease dropped so
that the worker is fenced) keeps holding its slot while that worker may still run: its row's
`slot_held_until` is its lease's end, until its daemon, having seen the worker exit, frees
it (`free_held`); a daemon dead or frozen frees it by that time (docs/design.md, "Workflow
options").
"""

from __future__ import annotations

from typing import Any


def lock(c: Any, workflow: str, slot: str) -> None:
    """Hold the slot group's lock until this transaction ends (the dialect's)."""
    c.dialect.lock_slot_group(c, workflow, slot)


def held(c: Any, workflow: str, slot: str, now: float) -> int:
    """How many executions of `workflow` hold a slot of group `slot` at `now`: leased, or
    ended without their worker and not yet known gone (call under `lock`)."""
    row = c.execute(
        "SELECT (SELECT COUNT(*) FROM executions WHERE workflow=? AND slot=? "
        "AND lease_token IS NOT NULL) + (SELECT COUNT(*) FROM executions WHERE workflow=? "
        "AND slot=? AND slot_held_until IS NOT NULL AND slot_held_until > ?)",
        (workflow, slot, workflow, slot, now),
    ).fetchone()
    return int(row[0])


def hold(
    c: Any,
    execution_id: str,
    slot: str | None,
    lease_expires_at: float | None,
    holder: str | None = None,
) -> None:
    """The execution ended without its worker in this transaction, its lease dropped: the
    slot that lease held stays held until `free_held`, or its lease's end at the latest. The
    row keeps the lease's holder (where leases name one): the daemon whose worker it was,
    whose recovery frees it (`free_own_held`)."""
    if slot is not None and lease_expires_at is not None:
        owner = ", lease_holder=?" if holder is not None else ""
        c.execute(
            f"UPDATE executions SET slot_held_until=?{owner} WHERE execution_id=?",
            (lease_expires_at, *([holder] if holder is not None else []), execution_id),
        )


def free_held(c: Any, execution_id: str) -> bool:
    """The worker of an execution that ended without it is gone: the slot it kept frees. Its
    row is locked first, then its group (by `free`, once): the order every lease's end and
    `heal` take them in, so two of them never wait for each other."""
    row = c.execute(
        "SELECT workflow, slot FROM executions WHERE execution_id=? "
        "AND slot_held_until IS NOT NULL" + c.dialect.for_update,
        (execution_id,),
    ).fetchone()
    if row is None:
        return False
    owner = ", lease_holder=NULL" if c.dialect.owned_leases else ""
    c.execute(
        f"UPDATE executions SET slot_held_until=NULL{owner} WHERE execution_id=?",
        (execution_id,),
    )
    free(c, row[0], row[1])
    return True


def free_own_held(c: Any, holder: str) -> None:
    """Recovery at start, once this daemon's workers are known gone: the slots they kept
    free (`holder`'s, where leases name one; else every one: the file has one daemon)."""
    owned = c.dialect.owned_leases
    rows = c.execute(
        "SELECT execution_id FROM executions WHERE slot_held_until IS NOT NULL"
        + (" AND lease_holder=?" if owned else "")
        + " ORDER BY execution_id",
        (holder,) if owned else (),
    ).fetchall()
    for (execution_id,) in rows:
        free_held(c, execution_id)


def wait(c: Any, execution_id: str, slot: str) -> None:
    """The execution (its row locked by the claim) waits for a slot of its group."""
    c.execute("UPDATE executions SET slot_wait=? WHERE execution_id=?", (slot, execution_id))


def free(c: Any, workflow: str, slot: str) -> None:
    """A lease of group `slot` ended in this transaction: its earliest due waiter may be
    claimed again (one per freed slot). Under the group's lock: see the module docstring."""
    lock(c, workflow, slot)
    c.execute(
        "UPDATE executions SET slot_wait=NULL WHERE execution_id = (SELECT execution_id "
        "FROM executions WHERE workflow=? AND slot_wait=? AND due_at IS NOT NULL "
        "ORDER BY due_at, execution_id LIMIT 1)",
        (workflow, slot),
    )


def heal(c: Any, now: float) -> None:
    """Groups whose waiters wait on slots nothing holds get them back: as many of their
    earliest waiters as there are free slots are claimable again (all of them when the
    workflow's limit was removed). `free` hands each freed slot to one waiter; if that one
    then ends without taking it (cancelled, timed out), nothing else would; a slot kept past
    its execution's end frees at its time with no one to say so. A safety net run by claims,
    at most once a second per store."""
    c.execute(
        "UPDATE executions SET slot_held_until=NULL WHERE slot_held_until IS NOT NULL "
        "AND slot_held_until <= ?",
        (now,),
    )
    groups = c.execute(
        "SELECT DISTINCT x.workflow, x.slot_wait, s.concurrency FROM executions x "
        "LEFT JOIN scripts s ON s.workflow = x.workflow WHERE x.slot_wait IS NOT NULL "
        # the groups' locks in one order: no deadlock between healers
        "ORDER BY x.workflow, x.slot_wait"
    ).fetchall()
    for workflow, group, n in groups:
        if n is None:
            release_waiters(c, workflow)
            continue
        lock(c, workflow, group)  # the count sees every commit of the group's holders
        spare = int(n) - held(c, workflow, group, now)
        if spare > 0:
            c.execute(
                "UPDATE executions SET slot_wait=NULL WHERE execution_id IN (SELECT "
                "execution_id FROM executions WHERE workflow=? AND slot_wait=? AND due_at "
                "IS NOT NULL ORDER BY due_at, execution_id LIMIT ?)",
                (workflow, group, spare),
            )


def release_waiters(c: Any, workflow: str) -> int:
    """Every waiter of `workflow` is claimable again (its script, and so its limit, changed)."""
    cur = c.execute(
        "UPDATE executions SET slot_wait=NULL WHERE workflow=? AND slot_wait IS NOT NULL",
        (workflow,),
    )
    return int(cur.rowcount)


def release_all_waiters(c: Any) -> None:
    """Every waiter of every workflow is claimable again (recovery at start: a limit may have
    been raised or removed while no daemon ran, and no lease of its group would free it)."""
    c.execute("UPDATE executions SET slot_wait=NULL WHERE slot_wait IS NOT NULL")


def waiting(c: Any, execution_ids: list[str]) -> dict[str, str]:
    """Which of these executions wait for a concurrency slot, and in which group."""
    if not execution_ids:
        return {}
    marks = ",".join("?" * len(execution_ids))
    rows = c.execute(
        f"SELECT execution_id, slot_wait FROM executions WHERE execution_id IN ({marks}) "
        "AND slot_wait IS NOT NULL AND due_at IS NOT NULL",
        list(execution_ids),
    ).fetchall()
    return {r[0]: r[1] for r in rows}
