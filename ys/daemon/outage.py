"""The dispatcher loop's view of a lost database: said once, tried again after a delay that
doubles from DOWN_RETRY_MIN up to DOWN_RETRY_MAX (docs/design.md, "On PostgreSQL": at most
5 s between tries), and said once more when claims work again."""

from __future__ import annotations

import logging
import time

from ys.errors import DaemonUnavailable, DatabaseUnavailable, YsError

log = logging.getLogger("ys.dispatcher")
DOWN_RETRY_MIN = 0.2
DOWN_RETRY_MAX = 5.0


class Outage:
    def __init__(self) -> None:
        self.since: float | None = None  # when the loop lost the database (monotonic)
        self._delay = DOWN_RETRY_MIN  # ... and how long it waits before it tries again
        self._said = False  # ... and whether the loop said so (the store says a lost database)

    @property
    def down(self) -> bool:
        return self.since is not None

    def lost(self, exc: BaseException | None) -> float:
        """A round failed (`exc`; None: no claim could tell whether the database is back):
        said once, and tried again after a backoff that doubles up to DOWN_RETRY_MAX."""
        if self.since is None:
            self.since = time.monotonic()
            self._delay = DOWN_RETRY_MIN
            self._said = True
            if isinstance(exc, DatabaseUnavailable):
                self._said = False  # the store says it, once for all its users
                log.debug("claiming failed: %s", exc.message)
            elif isinstance(exc, DaemonUnavailable):
                log.error("the database cannot be reached (%s); trying again", exc.message)
            elif isinstance(exc, YsError):
                log.error("claiming failed (%s); trying again", exc.message)
            else:
                log.error("claiming failed; trying again", exc_info=exc)
        else:
            self._delay = min(DOWN_RETRY_MAX, self._delay * 2)
        return self._delay

    def back(self) -> None:
        """A store call of the loop worked: a lost database is back (said once)."""
        if self.since is not None:
            if self._said:
                log.warning("claims work again (after %.1f s)", time.monotonic() - self.since)
            self.since = None
