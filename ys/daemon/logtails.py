"""On a database other daemons share, the end of each delivery's log is kept there too, so
that `ys logs` on another box shows it (the whole log stays on this one)."""

from __future__ import annotations

import logging

from ys.daemon.hub import Hub
from ys.daemon.running import Running
from ys.daemon.tasks import Background
from ys.store.protocols import LOG_TAIL_BYTES, Store

log = logging.getLogger("ys.dispatcher")


class LogTails:
    def __init__(self, store: Store, hub: Hub, daemon_id: str) -> None:
        self.store = store
        self.hub = hub
        self.daemon_id = daemon_id  # the daemon's ID (ys.daemon.identity), named with each
        self._writes = Background()

    def keep(self, r: Running) -> None:
        """Keep the end of `r`'s closed log, once its outcome or release is written, off its
        path: a slow write here must not hold the delivery (nor its lease) open."""
        self._writes.spawn(self._keep(r))

    async def wait(self, timeout: float) -> None:
        """Let the writes under way end (before the store closes)."""
        await self._writes.wait(timeout)

    async def _keep(self, r: Running) -> None:
        d = r.delivery
        try:
            with open(r.log_path, "rb") as f:
                size = f.seek(0, 2)
                f.seek(max(0, size - LOG_TAIL_BYTES))
                tail = f.read()
            await self.hub.call(
                self.store.keep_log_tail,
                d.execution_id,
                d.attempt,
                daemon_id=self.daemon_id,
                path=r.log_path,
                size=size,
                tail=tail,
            )
        except Exception as exc:  # the outcome stands; only other boxes miss the log's end
            log.warning("%s: the end of its log was not kept: %s", d.execution_id, exc)
