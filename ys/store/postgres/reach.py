"""Whether the PostgreSQL server answers, as this daemon's connections last found it.

The writer (its connection) and the listener (its own) each say when they could not connect;
any connection that succeeds afterwards (either of theirs, or a read's own) says the server
answers again, so the state recovers with the first of them, not only once the one that lost
it tries again (the writer's may not until its next claim). The log says it once
when the server stops answering and once when it answers again, whatever fails meanwhile
(docs/design.md, "On PostgreSQL": `ys daemon status`, `ys doctor` and `ys_database_up` read `up`).
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("ys.store.postgres")


class Reach:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cut: set[str] = set()  # who could not connect, the last time it tried
        self._since = 0.0  # when the server stopped answering (time.monotonic())

    @property
    def up(self) -> bool:
        return not self._cut

    def lost(self, who: str, why: object) -> None:
        """`who` could not connect (`why`)."""
        with self._lock:
            first = not self._cut
            self._cut.add(who)
            if first:
                self._since = time.monotonic()
        if first:
            log.error("the database cannot be reached (%s); trying again", _line(why))

    def back(self, who: str) -> None:
        """`who` connected: the server answers, whoever was cut off before."""
        with self._lock:
            if not self._cut:
                return
            self._cut.clear()
        log.warning("the database answers again (after %.1f s)", time.monotonic() - self._since)


def _line(why: object) -> str:
    """The first line of an error (psycopg's messages run over several)."""
    text = str(why).strip()
    return text.splitlines()[0] if text else type(why).__name__
