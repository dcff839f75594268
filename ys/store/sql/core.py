"""What the core's clients need of an adapter: the `Core` protocol both adapters' cores
satisfy, so that one set of client classes serves every SQL engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ys.store.base import Parent, Then
from ys.store.reading import DatabaseInfo
from ys.store.sql.dialect import Dialect

T = TypeVar("T")


DEFAULT_HOLDER = "store"  # the lease holder of a store opened without a daemon ID


class Core(Protocol):
    """One database: its clock, its writer, its reads.

    `write(fn)` runs `fn(conn)` in a write transaction (its own, or its share of a group
    commit); `read(fn)` runs it on a read connection, statement by statement; `snapshot(fn)`
    in one read transaction that sees one committed state. The connection `fn` gets takes the
    core's `?` statements (ys.store.sql.dialect)."""

    dialect: Dialect
    clock: Callable[[], float]
    lease_seconds: float
    holder: str  # whose leases this store takes (recovery releases only its own)
    pid: int
    read_only: bool
    prepares: bool  # whether admissions come with their rows prepared (`admission_rows`)

    def now(self, now: float | None) -> float: ...

    def write(self, fn: Callable[[Any], T], inserts: Any = None, value: Any = None) -> T: ...

    async def write_async(
        self, fn: Callable[[Any], T], inserts: Any = None, value: Any = None
    ) -> T: ...

    def submit(self, fn: Callable[[Any], T], then: Then) -> None:
        """`write` answered by `then(result, error)` on the writer's thread."""

    def admission_rows(
        self,
        execution_id: str,
        workflow: str,
        params_json: str,
        context_json: str,
        parent: Parent | None,
        at: float,
        tags: dict[str, str] | None,
        due_at: float | None = None,
    ) -> Any:
        """A new execution's rows prepared for the writer (only where `prepares`)."""

    def read(self, fn: Callable[[Any], T]) -> T: ...

    def snapshot(self, fn: Callable[[Any], T]) -> T: ...

    def database(self, c: Any) -> DatabaseInfo:
        """Where the database is, its size in bytes and its schema version (read on `c`)."""

    def script_recorded(self, workflow: str, sha256: str) -> None:
        """The workflow's current script version was just recorded (a core may cache it)."""

    def observe_commits(self, observer: Callable[[float, int], None] | None) -> None:
        """Call `observer(seconds, requests)` after each commit of the writer."""

    def health(self) -> Any:
        """`ys doctor`'s checks of the database (a `protocols.Health`), never written."""

    def close(self) -> None: ...
