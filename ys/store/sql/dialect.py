"""What differs between the SQL engines the core runs on, and nothing else.

The core's statements are written once, with `?` placeholders. A `Dialect` carries the few
clauses that differ (row locks, which SQLite has no need of: its writer holds the whole file)
and the hooks an engine adds; `FormatConnection` lets a driver whose placeholder is `%s`
(psycopg) run the core's statements unchanged, each statement translated once and cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class Dialect:
    """An engine's differences, as the core uses them. The defaults are an engine whose
    writer holds the whole database (SQLite): no row locks, leases without holders.
    Every connection a transaction body gets carries its dialect (`c.dialect`).

    `for_update`: appended to a SELECT whose rows the transaction goes on to change (with
    many writers, " FOR UPDATE": two daemons never fold events onto one record at once).
    `skip_locked`: the same for a claim or sweep that must not wait on rows another writer
    holds (" FOR UPDATE SKIP LOCKED"). `owned_leases`: a lease names its holder and process
    (`lease_holder`, `lease_pid`), so recovery releases only its own daemon's. `pipelined`:
    the writer sends a transaction's statements without waiting for each answer and settles
    a body's `Later` (ys/store/sql/requests.py) once the batch with its COMMIT is answered."""

    name = "sql"
    for_update = ""
    for_share = ""  # a row read that a concurrent update must wait for (" FOR SHARE")
    skip_locked = ""
    owned_leases = False
    pipelined = False

    def lock_slot_group(self, c: Any, workflow: str, slot: str) -> None:
        """Hold a concurrency slot group's lock until the transaction ends (before counting,
        taking or freeing its slots). Nothing to do where one writer holds the database."""

    def lock_value_key(self, c: Any, key: str) -> None:
        """Hold a durable value key's lock until the transaction ends (a put, a delete and a
        wait on the key take it first). Nothing to do where one writer holds the database."""

    def indexed_by(self, index: str) -> str:
        """A table's index hint, where the planner needs one (SQLite: " INDEXED BY ...")."""
        return ""

    def prefix_index(self, c: Any, prefix: str, narrowed: bool) -> str:
        """The index hint of a find by ID prefix (`narrowed`: statuses narrow it too)."""
        return ""

    def json_text(self, column: str, key: str) -> str:
        """The text of top-level `key` of the JSON object in `column` (SQLite's json_extract)."""
        return f"json_extract({column}, '$.{key}')"

    def starts_with(self, column: str, prefix: str) -> tuple[str, str]:
        """A case-sensitive `column` starts with `prefix` test: (SQL with one `?`, its
        argument), the prefix's wildcards escaped."""
        raise NotImplementedError


_FORMAT: dict[str, str] = {}


def to_format(sql: str) -> str:
    """`sql` with each `?` placeholder made `%s` and each literal `%` made `%%` (the format
    paramstyle); text inside single quotes is left as it is. Cached per statement text."""
    out = _FORMAT.get(sql)
    if out is not None:
        return out
    if "?" not in sql:  # no placeholder: the statement is the driver's own already
        return sql
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

    __slots__ = ("raw", "dialect")

    def __init__(self, raw: Any, dialect: Dialect) -> None:
        self.raw = raw
        self.dialect = dialect

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
