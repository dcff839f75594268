"""The daemon: one process, one asyncio loop, one instance per home (guarded by a lock).

Start-up order matters: lock, store, recovery, registry loaded, then the socket, so the first
request after `ys daemon start` returns already sees every script and every recovered record.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ys.daemon.hub import Hub
from ys.daemon.recovery import kill_orphans, recover
from ys.paths import Paths

log = logging.getLogger("ys.daemon")


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def private_dir(path: Path) -> None:
    """A folder only its owner may enter (0700); refuse one that belongs to someone else."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise SystemExit(f"ys: {path} belongs to uid {st.st_uid}; refusing to use it")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


class Daemon:
    def __init__(self, paths: Paths, concurrency: int = 4) -> None:
        self.paths = paths
        self.concurrency = concurrency
        self.lease_seconds = _env_float("YS_LEASE_SECONDS", 30.0)
        self.grace = _env_float("YS_GRACE_SECONDS", 10.0)
        self.started_at = time.time()
        self._stop: asyncio.Event | None = None
        self.store: Any = None
        self.hub = Hub()

    def request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    async def serve(self) -> None:
        from aiohttp import web

        from ys.daemon.api import Api, make_app
        from ys.daemon.dispatcher import Dispatcher
        from ys.daemon.http import HttpSettings, UnixSite
        from ys.daemon.launcher import make_launcher
        from ys.daemon.registry import Registry
        from ys.store.sqlite import SqliteStore

        self._stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)

        self.store = SqliteStore(self.paths.db, group_commit=True, lease_seconds=self.lease_seconds)
        self.registry = Registry(self.paths.workflows, on_change=self._workflow_changed)
        self.launcher = make_launcher()
        self.dispatcher = Dispatcher(
            self.store, self.registry, self.launcher, self.paths, self.hub,
            concurrency=self.concurrency, lease_seconds=self.lease_seconds,
            retry_base=_env_float("YS_RETRY_BASE_SECONDS", 1.0),
        )
        from ys.daemon.scheduler import Scheduler

        self.scheduler = Scheduler(self)
        await self.hub.call(recover, self.store, self.paths)
        await self.registry.load()
        await self.scheduler.sync_declared(self.registry.workflows)

        http = HttpSettings.from_env()
        runner = web.AppRunner(make_app(Api(self), http), handle_signals=False)
        await runner.setup()
        sock = self.paths.socket
        if sock.exists() or sock.is_symlink():
            sock.unlink()  # we hold the lock, so whatever answered here is gone: a stale socket
        old = os.umask(0o177)  # the socket is born 0600: no chmod race
        try:
            site = UnixSite(runner, str(sock), http)  # JSON answers for bad HTTP, read timeouts
            await site.start()
        finally:
            os.umask(old)
        self.registry.start_watching()
        self.dispatcher.start()
        self.scheduler.start()
        log.info("ys daemon %d listening on %s (db %s, workflows %s)",
                 os.getpid(), sock, self.paths.db, self.paths.workflows)
        try:
            await self._stop.wait()
        finally:
            self.hub.stop_waits()
            log.info("stopping: no new deliveries; %d running get %.0fs",
                     len(self.dispatcher.running), self.grace)
            await self.scheduler.stop()
            await self.dispatcher.stop(self.grace)
            close = getattr(self.launcher, "close", None)
            if close is not None:
                await close()
            await self.registry.stop()
            await runner.cleanup()
            try:
                sock.unlink()
            except FileNotFoundError:
                pass
            self.hub.close()
            self.store.close()
            log.info("stopped")

    async def _workflow_changed(self, wf: Any) -> None:
        """A script became runnable: executions that waited for it are woken; schedules it
        declares follow it."""
        await self.scheduler.sync_declared(self.registry.workflows)
        if wf.error is None and self.registry.get(wf.name) is not None:
            n = await self.hub.call(wake_waiting, self.store, wf.name)
            if n:
                log.info("workflow %s is runnable: woke %d waiting executions", wf.name, n)
                self.dispatcher.poke()


def wake_waiting(store: Any, workflow: str) -> int:
    """Wake every non-terminal, unleased execution of `workflow` (they waited for the script)."""
    rows = store.reader().execute(
        "SELECT execution_id FROM executions WHERE workflow=? AND status IN ('admitted','suspended')"
        " AND lease_token IS NULL AND (due_at IS NULL OR due_at > ?)",
        (workflow, time.time()),
    ).fetchall()
    n = 0
    for (execution_id,) in rows:
        if store.request_wake(execution_id, reason=f"workflow {workflow} changed") == "requested":
            n += 1
    return n


def acquire_lock(paths: Paths) -> Any:
    """One daemon per home: an exclusive lock held for the daemon's whole life."""
    private_dir(paths.runtime)
    f = open(paths.lock, "a+")  # noqa: SIM115 - held open until exit
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def run(paths: Paths, concurrency: int = 4) -> int:
    """Run the daemon in the foreground until SIGTERM/SIGINT; returns the exit status."""
    from ys.daemon.logsetup import setup_logging

    setup_logging(paths)  # daemon.log rotated and private, repeated errors rate-limited
    os.umask(0o077)  # the database, logs and everything else the daemon writes are private
    lock = acquire_lock(paths)
    if lock is None:
        sys.stderr.write(f"ys: a daemon is already running for {paths.runtime}\n")
        return 1
    for d in (paths.data, paths.logs):
        private_dir(d)
    paths.db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    kill_orphans(paths)
    try:
        asyncio.run(Daemon(paths, concurrency).serve())
    finally:
        lock.close()
    return 0
