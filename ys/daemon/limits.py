"""A workflow's concurrency limit, read from what its script declares (`concurrency=N` and
`key=FIELD` in `@ys.workflow(...)` or its `# ys:` header; DESIGN.md §7).

The limit reaches the store at each claim (`claim_due(limits=Registry.limits)`), not at
admission: it is a property of the script as it is now, like the code a delivery runs, so an
edited limit applies to the executions already queued and no admission path has to carry it.
Daemons sharing a database each apply the limits of their own workflows folder (the same
folder on every box). Executions whose `params` lack the key's field (or are no object)
share one slot group of their own (`ys.store.base.SLOT_MISSING`).
"""

from __future__ import annotations

from typing import Any

from ys.store.protocols import ConcurrencyLimit

MAX_CONCURRENCY = 1_000_000


def concurrency_limit(options: dict[str, Any]) -> tuple[ConcurrencyLimit | None, str | None]:
    """(the limit, None) of a script's declared options, (None, None) without one, or (None,
    why it is refused): the script's load error."""
    n, key = options.get("concurrency"), options.get("key")
    if n is None:
        if key is not None:
            return None, f"bad key: key={key!r} limits nothing without concurrency=N"
        return None, None
    if isinstance(n, bool) or not isinstance(n, int | str):
        return None, f"bad concurrency: {n!r} is not a whole number"
    try:
        value = int(n)
    except ValueError:
        return None, f"bad concurrency: {n!r} is not a whole number"
    if not 1 <= value <= MAX_CONCURRENCY:
        return None, f"bad concurrency: {value} (at least 1, at most {MAX_CONCURRENCY})"
    if key is not None and (not isinstance(key, str) or not key):
        return None, f"bad key: {key!r} (the name of a params field)"
    return ConcurrencyLimit(value, key), None
