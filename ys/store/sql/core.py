"""What the core's clients need of an adapter: the `Core` protocol both adapters' cores
satisfy, so that one set of client classes serves every SQL engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ys.store.sql.dialect import Dialect

T = TypeVar("T")


class Core(Protocol):
    """One database: its clock, its writer, its reads.

    `write(fn)` runs `fn(conn)` in a write transaction (its own, or its share of a group
    commit); `read(fn)` runs it on a read connection, statement by statement; `snapshot(fn)`
    in one read transaction that sees one committed state. The connection `fn` gets takes the
    core's `?` statements (ys.store.sql.dialect)."""

    dialect: Dialect
    lease_seconds: float
    holder: str  # whose leases this store takes (recovery releases only its own)
    read_only: bool

    def now(self, now: float | None) -> float: ...

    def write(self, fn: Callable[[Any], T]) -> T: ...

    def read(self, fn: Callable[[Any], T]) -> T: ...

    def snapshot(self, fn: Callable[[Any], T]) -> T: ...

    def close(self) -> None: ...
