"""What differs between the SQL engines the core runs on, and nothing else.

The core's statements are written once, with `?` placeholders. A `Dialect` carries the few
clauses that differ (row locks, which SQLite has no need of: its writer holds the whole file)
and the hooks an engine adds; `FormatConnection` lets a driver whose placeholder is `%s`
(psycopg) run the core's statements unchanged, each statement translated once and cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Dialect:
    """An engine's differences, as the core uses them.

    `for_update`: appended to a SELECT whose rows the transaction goes on to change (PostgreSQL:
    " FOR UPDATE", so two daemons never fold events onto the same record at once; SQLite: "",
    its write transaction already excludes every other writer). `skip_locked`: the same for a
    claim or sweep that must not wait on rows another daemon holds (" FOR UPDATE SKIP LOCKED")."""

    name: str
    for_update: str
    skip_locked: str
    shared: bool  # several daemons write the database (leases carry their holder)


SQLITE = Dialect(name="sqlite", for_update="", skip_locked="", shared=False)
POSTGRES = Dialect(
    name="postgres", for_update=" FOR UPDATE", skip_locked=" FOR UPDATE SKIP LOCKED", shared=True
)

_FORMAT: dict[str, str] = {}


def to_format(sql: str) -> str:
    """`sql` with each `?` placeholder made `%s` and each literal `%` made `%%` (the format
    paramstyle); text inside single quotes is left as it is. Cached per statement text."""
    out = _FORMAT.get(sql)
    if out is not None:
        return out
    parts: list[str] = []
    quoted = False
    for ch in sql:
        if ch == "'":
            quoted = not quoted
            parts.append(ch)
        elif quoted:
            parts.append("%%" if ch == "%" else ch)
        elif ch == "?":
            parts.append("%s")
        elif ch == "%":
            parts.append("%%")
        else:
            parts.append(ch)
    out = "".join(parts)
    if len(_FORMAT) < 4096:  # statements are a bounded set; a multi-row text is not cached past it
        _FORMAT[sql] = out
    return out


class FormatConnection:
    """A connection whose `execute` and `executemany` take the core's `?` statements and hand
    the driver `%s` ones; everything else is the driver connection's own."""

    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        if params is None:
            return self.raw.execute(sql)
        return self.raw.execute(to_format(sql), params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any:
        cur = self.raw.cursor()
        cur.executemany(to_format(sql), rows)
        return cur

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)
