"""`PostgresStore`: the SQL core's clients (ys/store/sql/store.py) over one PostgreSQL
database that many daemons share. `daemon_id` names the lease holder: recovery releases only
the leases its holder took."""

from __future__ import annotations

from collections.abc import Callable

from ys.store.postgres.core import DEFAULT_LEASE_SECONDS, Core
from ys.store.sql.store import SqlStore


class PostgresStore(SqlStore):
    """One PostgreSQL database. Thread-safe: writes go through one writer (a group commit
    in the daemon), reads through a pool of connections."""

    shared = True  # the daemons of many boxes write it
    core: Core

    def __init__(
        self,
        url: str,
        *,
        group_commit: bool = False,
        clock: Callable[[], float] | None = None,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        read_only: bool = False,
        daemon_id: str | None = None,
    ) -> None:
        core = Core(
            url,
            group_commit=group_commit,
            clock=clock,
            lease_seconds=lease_seconds,
            read_only=read_only,
            daemon_id=daemon_id,
        )
        super().__init__(core)
        self.url = url
        self.daemon_id = core.holder

    def watch(
        self, on_due: Callable[[], None], on_change: Callable[[str, str], None] | None = None
    ) -> None:
        """Other daemons' commits, heard through the core's listener."""
        self.core.watch(on_due, on_change)

    def database_up(self) -> bool:
        return self.core.database_up()


__all__ = ["PostgresStore"]
