"""Concurrency limits on PostgreSQL: the claim's side (`claim_due_tx` counts `held` slots before it
leases an execution of a limited workflow) and the side of a lease that ends (`free`), with
the same rows as on SQLite (ys/store/sqlite/concurrency.py): `slot` on a leased row names the
slot group its lease holds, `slot_wait` marks a due execution waiting for a slot.

Why the count cannot be skewed by two daemons claiming at once. READ COMMITTED with SKIP
LOCKED alone would allow it: two claims lock different rows of one group, each counts the
leases committed before it (N-1), and both lease: N+1. So every transaction that counts,
takes or frees a slot of a group first takes that group's transaction-scoped advisory lock
(`lock`), held to its commit. A claim's count statement starts after the lock is granted,
so after every earlier holder committed: under READ COMMITTED each statement sees all that
was committed before it began, and no other lease of the group can be in flight. The same
lock keeps a freed slot from being lost: a release that frees a slot while a claim is
marking a waiter waits for that claim's commit, then finds the waiter marked and clears it.
(Today every writer transaction also takes EVENT_LOG_LOCK first, writer.py, so these locks
never wait; they keep the rule safe on their own should that lock go. A deadlock between
them and row locks is then rolled back and retried whole by the writer.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ys.store.base import ConcurrencyLimit

# The class of the two-key advisory locks (a 64-bit key and two 32-bit keys never overlap,
# so this cannot meet MIGRATION_LOCK or EVENT_LOG_LOCK): 'ys' 'sl' in ASCII.
SLOT_LOCK_CLASS = 0x7973_736C  # an int4


def lock(c: Any, workflow: str, slot: str) -> None:
    """Hold the slot group's advisory lock until this transaction ends (a hash collision of
    two groups only makes them wait for each other)."""
    c.execute(
        "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
        (SLOT_LOCK_CLASS, f"{workflow}\x1f{slot}"),
    )


def held(c: Any, workflow: str, slot: str) -> int:
    """How many leases of `workflow` hold a slot of group `slot` now (call under `lock`)."""
    row = c.execute(
        "SELECT COUNT(*) FROM executions WHERE workflow=%s AND slot=%s AND lease_token IS NOT NULL",
        (workflow, slot),
    ).fetchone()
    return int(row[0])


def wait(c: Any, execution_id: str, slot: str) -> None:
    """The execution (its row locked by the claim) waits for a slot of its group."""
    c.execute("UPDATE executions SET slot_wait=%s WHERE execution_id=%s", (slot, execution_id))


def free(c: Any, workflow: str, slot: str) -> None:
    """A lease of group `slot` ended in this transaction: its earliest due waiter may be
    claimed again (one per freed slot). Under the group's lock: see the module docstring."""
    lock(c, workflow, slot)
    c.execute(
        "UPDATE executions SET slot_wait=NULL WHERE execution_id = (SELECT execution_id "
        "FROM executions WHERE workflow=%s AND slot_wait=%s AND due_at IS NOT NULL "
        "ORDER BY due_at, execution_id LIMIT 1)",
        (workflow, slot),
    )


def heal(c: Any, limits: Mapping[str, ConcurrencyLimit]) -> None:
    """Groups whose waiters wait on slots no lease holds get them back: as many of their
    earliest waiters as there are free slots are claimable again. `free` hands each freed slot
    to one waiter; if that one then ends without taking it (cancelled, timed out), nothing
    else would. A safety net run by claims, at most once a second per store."""
    for workflow, bound in limits.items():
        groups = c.execute(
            "SELECT DISTINCT slot_wait FROM executions WHERE workflow=%s AND slot_wait IS NOT NULL "
            "ORDER BY slot_wait",  # the groups' locks in one order: no deadlock between healers
            (workflow,),
        ).fetchall()
        for (group,) in groups:
            lock(c, workflow, group)  # the count sees every commit of the group's holders
            spare = bound.n - held(c, workflow, group)
            if spare > 0:
                c.execute(
                    "UPDATE executions SET slot_wait=NULL WHERE execution_id IN (SELECT "
                    "execution_id FROM executions WHERE workflow=%s AND slot_wait=%s AND due_at "
                    "IS NOT NULL ORDER BY due_at, execution_id LIMIT %s)",
                    (workflow, group, spare),
                )


def release_waiters(c: Any, workflow: str) -> int:
    """Every waiter of `workflow` is claimable again (its script, and so its limit, changed)."""
    cur = c.execute(
        "UPDATE executions SET slot_wait=NULL WHERE workflow=%s AND slot_wait IS NOT NULL",
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
    rows = c.execute(
        "SELECT execution_id, slot_wait FROM executions WHERE execution_id = ANY(%s) "
        "AND slot_wait IS NOT NULL AND due_at IS NOT NULL",
        (list(execution_ids),),
    ).fetchall()
    return {r[0]: r[1] for r in rows}
