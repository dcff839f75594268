"""PostgreSQL's dialect: many daemons write one database at READ COMMITTED, so a write that
changes a row locks it first (FOR UPDATE), a claim or sweep skips rows another daemon holds
(SKIP LOCKED), a lease names its holder and process, and a concurrency slot group is counted
under its advisory lock.

Why a concurrency limit's count (ys/store/sql/concurrency.py) cannot be skewed by two daemons
claiming at once. READ COMMITTED with SKIP LOCKED alone would allow it: two claims lock
different rows of one group, each counts the leases committed before it (N-1), and both lease:
N+1. So every transaction that counts, takes or frees a slot of a group first takes that
group's transaction-scoped advisory lock (`lock`), held to its commit. A claim's count
statement starts after the lock is granted, so after every earlier holder committed: under READ
COMMITTED each statement sees all that was committed before it began, and no other lease of the
group can be in flight. The same lock keeps a freed slot from being lost: a release that frees
a slot while a claim is marking a waiter waits for that claim's commit, then finds the waiter
marked and clears it. (Today every writer transaction also takes EVENT_LOG_LOCK first,
writer.py, so these locks never wait; they keep the rule safe on their own should that lock go.
A deadlock between them and row locks is then rolled back and retried whole by the writer.)
"""

from __future__ import annotations

from typing import Any

from ys.store.sql.dialect import Dialect

# The class of the two-key advisory locks (a 64-bit key and two 32-bit keys never overlap,
# so this cannot meet MIGRATION_LOCK or EVENT_LOG_LOCK): 'ys' 'sl' in ASCII.
SLOT_LOCK_CLASS = 0x7973_736C  # an int4


class PostgresDialect(Dialect):
    name = "postgres"
    for_update = " FOR UPDATE"
    for_share = " FOR SHARE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    owned_leases = True
    pipelined = True  # ys/store/postgres/writer.py

    def lock_slot_group(self, c: Any, workflow: str, slot: str) -> None:
        """The slot group's transaction-scoped advisory lock (a hash collision of two groups
        only makes them wait for each other)."""
        c.execute(
            "SELECT pg_advisory_xact_lock(?, hashtext(?))",
            (SLOT_LOCK_CLASS, f"{workflow}\x1f{slot}"),
        )

    def lock_value_key(self, c: Any, key: str) -> None:
        """Without it, at READ COMMITTED, a wait on one daemon could read the old version while
        a put on another commits and finds no waiter (the wait's row not committed yet): the
        waiter would sleep through the put it waits for. With it, whichever comes second sees
        the other's commit. A key that has no row yet has nothing to lock with FOR UPDATE,
        hence an advisory lock rather than a row lock."""
        c.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (KEY_LOCKS, key))

    def json_text(self, column: str, key: str) -> str:
        return f"({column}::jsonb ->> '{key}')"

    def starts_with(self, column: str, prefix: str) -> tuple[str, str]:
        # LIKE is case-sensitive here (unlike SQLite's): "approve/" never lists "Approve/...".
        # Its wildcards and escape character in the prefix are escaped.
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return f"{column} LIKE ?", escaped + "%"


KEY_LOCKS = 0x7973  # the advisory lock space of value keys ('ys'), beside the key's hash
POSTGRES = PostgresDialect()
