"""What the store offers for observing and versions, beside the execution client: the
counts metrics read, the all-executions event stream, the script versions admissions record
and claims run, and a commit observer. Mixed into `SqliteStore`; the SQL is in
ys/store/metrics.py, stream.py and versions.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ys.store.base import check_time
from ys.store.db import MethodGroup


class ObservingMethods(MethodGroup):
    """SqliteStore's reads for metrics and the event stream, and its script versions."""

    def shared_counts(self, now: float | None = None) -> Any:
        """What every daemon on this database reports alike (ys.store.metrics.SharedCounts)."""
        from ys.store.metrics import shared_counts

        return shared_counts(self.reader(), self._now(now))

    def event_stream(self, cursor: str | None = None, *, since: float | None = None,
                     limit: int = 1000) -> tuple[list[dict[str, Any]], str]:
        """Events of every execution after `cursor`, in commit order, and the cursor after
        them. Without a cursor: from `since` (epoch seconds), else from now (none yet)."""
        from ys.store import stream

        c = self.reader()
        if cursor is not None:
            after = stream.check_cursor(cursor)
        elif since is not None:
            after = stream.position_before(c, check_time(since, "since"))
        else:
            return [], str(stream.last_position(c))
        items, pos = stream.events_after(c, after, limit)
        return items, str(pos)

    # -- script versions --------------------------------------------------------------------

    def set_script(self, workflow: str, sha256: str, *, pin: bool = False,
                   now: float | None = None) -> None:
        """The version of `workflow`'s script the daemon sees now: what admissions record,
        and what unpinned deliveries run."""
        from ys.store.versions import set_script_tx

        t = self._now(now)
        self.write(lambda c: set_script_tx(c, workflow, sha256, pin, t))
        self._scripts[workflow] = sha256  # type: ignore[attr-defined]

    def scripts_needed(self) -> set[str]:
        """Versions a live execution needs, and each workflow's current one (ys gc keeps them)."""
        from ys.store.versions import needed

        return needed(self.reader())

    def stale_scripts(self) -> dict[str, int]:
        """Per workflow: live executions admitted under an older version than the current."""
        from ys.store.versions import stale

        return stale(self.reader())

    def observe_commits(self, observer: Callable[[float, int], None] | None) -> None:
        """Call `observer(seconds, requests)` after each commit of the writer (metrics)."""
        self._writer.observe = observer  # type: ignore[attr-defined]
