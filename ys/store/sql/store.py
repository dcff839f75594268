"""One store class for every SQL adapter: the core's clients, composed once.

Each client lives beside its SQL in ys/store/sql/ (executions, retries, starts, effects,
values, schedules, reads, the dashboard's reads, housekeeping, observing) and works on a
`Core` (ys/store/sql/core.py): an adapter's connection, writer and clock, with its dialect.
`SqlStore` is every one of them at once, so a call through the store is a method of one
class (the hot paths, admit_async, save_step_async and claim_due, cost no more than that).
An adapter's store (`SqliteStore`, `PostgresStore`) only opens its core and says whether
other daemons write the database too.
"""

from __future__ import annotations

from collections.abc import Callable

from ys.store.sql.core import Core
from ys.store.sql.effects import Effects
from ys.store.sql.execution_client import Executions
from ys.store.sql.housekeeping import Housekeeping
from ys.store.sql.observing import Observing
from ys.store.sql.overview import Overview
from ys.store.sql.reads import Reads
from ys.store.sql.retries import Retries
from ys.store.sql.schedules import Schedules
from ys.store.sql.starts import Starts
from ys.store.sql.transfer import Transfers
from ys.store.sql.values import Values


class SqlStore(
    Executions,
    Retries,
    Starts,
    Effects,
    Values,
    Schedules,
    Reads,
    Overview,
    Housekeeping,
    Observing,
    Transfers,
):
    """Every client of `ys.store.protocols.Store` over one core. Thread-safe as its core is:
    writes go through one writer, reads through the core's read connections."""

    shared = False  # whether other daemons write the database too (the adapter says)

    def __init__(self, core: Core) -> None:
        Executions.__init__(self, core)  # each client keeps only `_core` (and these)
        self.core = core
        self.clock = core.clock
        self.lease_seconds = core.lease_seconds

    def watch(
        self, on_due: Callable[[], None], on_change: Callable[[str, str], None] | None = None
    ) -> None:
        """Nothing to watch where this daemon is the database's only writer: it knows every
        commit (an adapter shared by many daemons overrides it)."""

    def database_up(self) -> bool:
        """A database this daemon opened itself answers while it runs (an adapter whose
        server may go away overrides it)."""
        return True

    def close(self) -> None:
        self.core.close()


__all__ = ["SqlStore"]
