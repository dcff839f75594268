"""A periodic loop's view of a lost database (the dispatcher's claims, the scheduler's fires
and housekeeping): said once, tried again after a delay that doubles from DOWN_RETRY_MIN up
to DOWN_RETRY_MAX (docs/design.md, "On PostgreSQL": at most 5 s between tries, and the log
says an outage once, not a traceback per operation), and said once more when the loop's
store calls work again."""

from __future__ import annotations

import logging
import time

from ys.errors import DaemonUnavailable, DatabaseUnavailable, YsError

DOWN_RETRY_MIN = 0.2
DOWN_RETRY_MAX = 5.0


class Outage:
    def __init__(
        self,
        log: logging.Logger | None = None,
        doing: str = "claiming",
        working: str = "claims work again",
    ) -> None:
        self.log = log or logging.getLogger("ys.dispatcher")
        self.doing = doing  # what failed, in the log: "claiming"
        self.working = working  # ... and what is said when it works again
        self.since: float | None = None  # when the loop lost the database (monotonic)
        self._delay = DOWN_RETRY_MIN  # ... and how long it waits before it tries again
        self._said = False  # ... and whether the loop said so (the store says a lost database)

    @property
    def down(self) -> bool:
        return self.since is not None

    def lost(self, exc: BaseException | None) -> float:
        """A round failed (`exc`; None: no store call could tell whether the database is
        back): said once, and tried again after a backoff that doubles up to DOWN_RETRY_MAX."""
        if self.since is None:
            self.since = time.monotonic()
            self._delay = DOWN_RETRY_MIN
            self._said = True
            if isinstance(exc, DatabaseUnavailable):
                self._said = False  # the store says it, once for all its users
                self.log.debug("%s failed: %s", self.doing, exc.message)
            elif isinstance(exc, DaemonUnavailable):
                self.log.error("the database cannot be reached (%s); trying again", exc.message)
            elif isinstance(exc, YsError):
                self.log.error("%s failed (%s); trying again", self.doing, exc.message)
            else:
                self.log.error("%s failed; trying again", self.doing, exc_info=exc)
        else:
            self._delay = min(DOWN_RETRY_MAX, self._delay * 2)
        return self._delay

    def back(self) -> None:
        """A store call of the loop worked: a lost database is back (said once)."""
        if self.since is not None:
            if self._said:
                self.log.warning("%s (after %.1f s)", self.working, time.monotonic() - self.since)
            self.since = None
