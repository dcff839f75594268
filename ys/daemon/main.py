"""The daemon: one process, one asyncio loop, one instance per database (guarded by a lock
beside the database file, which names the holder's pid) and per socket.

Start-up order matters: lock, store, recovery, registry loaded, then the socket, so the first
request after `ys daemon start` returns already sees every script and every recovered record.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ys.daemon.hub import Hub
from ys.daemon.moved import MovedWatch
from ys.daemon.orphans import kill_orphans
from ys.daemon.recovery import recover
from ys.errors import DaemonUnavailable, DatabaseMoved, YsError
from ys.paths import Paths
from ys.settings import Settings
from ys.store.protocols import TERMINAL, ScriptOptions

if TYPE_CHECKING:
    from aiohttp import web

    from ys.daemon.dispatcher import Dispatcher
    from ys.daemon.launcher import Launcher
    from ys.daemon.metrics import Metrics
    from ys.daemon.registry import Registry, Workflow
    from ys.daemon.running import Running
    from ys.daemon.scheduler import Scheduler
    from ys.daemon.tracing import Tracer
    from ys.store.protocols import Store
    from ys.tracing import TracingJson

log = logging.getLogger("ys.daemon")


def private_dir(path: Path) -> None:
    """A folder only its owner may enter (0700); refuse one that belongs to someone else."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = path.stat()
    if st.st_uid != os.getuid():
        raise SystemExit(f"ys: {path} belongs to uid {st.st_uid}; refusing to use it")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


class Daemon:
    def __init__(self, paths: Paths, settings: Settings | None = None, daemon_id: str = "") -> None:
        self.paths = paths
        self.settings = settings or Settings()
        self.concurrency = self.settings.concurrency
        self.daemon_id = daemon_id
        # read once, with every other setting, before start-up (ys.settings)
        self.lease_seconds = self.settings.lease_seconds
        self.grace = self.settings.grace_seconds
        self.started_at = time.time()
        self._stop: asyncio.Event | None = None
        self._main: asyncio.Task[Any] | None = None
        self.serving = False  # start-up is over (SIGTERM now stops gracefully)
        self.stopping = False
        self.hub = Hub()
        # Built by _start, in this order; None until then, so _shutdown takes down only what
        # exists when start-up fails half-way.
        self._store: Store | None = None
        self._registry: Registry | None = None
        self._launcher: Launcher | None = None
        self._dispatcher: Dispatcher | None = None
        self._scheduler: Scheduler | None = None
        self._runner: web.AppRunner | None = None
        self._tracer: Tracer | None = None
        self._moved_watch: MovedWatch | None = None
        # the database was marked moved while the daemon ran: it stopped (exit 3)
        self.moved: DatabaseMoved | None = None
        self.bound = False  # the socket file is ours to remove
        self.on_failure: str | None = None  # config.toml's folder-wide failure handler
        self._handlers_warned: set[str] = set()  # handlers naming no workflow, logged once
        self._metrics: Metrics | None = None

    # The parts the routes and the scheduler use (DaemonParts), once start-up built them.

    @property
    def metrics(self) -> Metrics:
        assert self._metrics is not None, "the daemon has not made its metrics yet"
        return self._metrics

    @property
    def store(self) -> Store:
        assert self._store is not None, "the daemon has not opened its store yet"
        return self._store

    @property
    def registry(self) -> Registry:
        assert self._registry is not None, "the daemon has no registry yet"
        return self._registry

    @property
    def dispatcher(self) -> Dispatcher:
        assert self._dispatcher is not None, "the daemon has no dispatcher yet"
        return self._dispatcher

    @property
    def scheduler(self) -> Scheduler:
        assert self._scheduler is not None, "the daemon has no scheduler yet"
        return self._scheduler

    def request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if not self.serving and not self.stopping and self._main is not None:
            self._main.cancel()  # still starting (loading scripts, say): stop now, not after

    async def serve(self) -> None:
        """Start, serve until asked to stop, stop. Whatever start-up had built when it failed is
        taken down again, so a daemon that cannot start exits (and frees its lock)."""
        self._stop = asyncio.Event()
        self._main = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        try:
            await self._start()
            self.serving = True
            log.info(
                "ys daemon %s (pid %d) listening on %s (database %s, workflows %s)",
                self.daemon_id,
                os.getpid(),
                self.paths.socket,
                self.settings.database_shown(self.paths.db),
                self.paths.workflows,
            )
            await self._stop.wait()
        finally:
            self.stopping = True  # no more cancelling: stopping runs to its end
            await self._shutdown()

    async def _start(self) -> None:
        from aiohttp import web

        from ys.daemon.api import Api, make_app
        from ys.daemon.cgroups import MemoryCgroups
        from ys.daemon.channel import WorkerChannel
        from ys.daemon.delivering import Deliveries
        from ys.daemon.dispatcher import Dispatcher, DispatcherParts, DispatcherTuning
        from ys.daemon.http import HttpSettings, UnixSite
        from ys.daemon.launcher import make_launcher
        from ys.daemon.metrics import Metrics
        from ys.daemon.registry import Registry
        from ys.daemon.scheduler import Scheduler
        from ys.store import open_store

        # config.toml's folder-wide failure handler (the settings were checked before start-up)
        self.on_failure = self.settings.on_failure
        self._metrics = Metrics()
        store = self._store = open_store(
            self.settings.database or self.paths.db,
            group_commit=True,
            lease_seconds=self.lease_seconds,
            daemon_id=self.daemon_id,
        )
        moved = store.moved_to()
        if moved is not None:  # its executions run where they went (docs/design.md)
            raise DatabaseMoved(self.settings.database_shown(self.paths.db), moved)
        registry = self._registry = Registry(self.paths.workflows, on_change=self._workflow_changed)
        # before the fork server starts: a child left in the daemon's cgroup would keep it
        # from giving its children the memory controller (ys.daemon.cgroups)
        memory = MemoryCgroups.set_up(Path(self.settings.cgroup_root))
        log.info("memory_max: %s", memory.choice.detail)
        launcher = self._launcher = make_launcher(self.concurrency, self.settings.launcher)
        self._tracer = self._make_tracer(store)
        # The worker channel answers through the delivery service, which reaches the
        # dispatcher through the daemon: built first, it is handed to the dispatcher.
        deliveries = Deliveries(self)

        def open_channel(r: Running, sock: socket.socket) -> WorkerChannel:
            return WorkerChannel(deliveries, r, sock)

        dispatcher = self._dispatcher = Dispatcher(
            DispatcherParts(
                store,
                registry,
                launcher,
                self.paths,
                self.hub,
                memory=memory,
                handler_for=self.handler_for,
                metrics=self.metrics,
                tracer=self._tracer,
                daemon_id=self.daemon_id,
                open_channel=open_channel,
            ),
            DispatcherTuning(
                concurrency=self.concurrency,
                lease_seconds=self.lease_seconds,
                retry_base=self.settings.retry_base_seconds,
                cancel_grace=self.settings.cancel_grace_seconds,
                log_max_bytes=self.settings.log_max_bytes,
            ),
        )
        store.observe_commits(self.metrics.observe_commit)
        self.metrics.watch_database(store.database_up)
        self.metrics.watch_dispatcher(dispatcher.busy)
        scheduler = self._scheduler = Scheduler(self, self.settings.retention)
        await self.hub.call(recover, store, self.paths)
        registry.on_version = lambda wf: self._keep_versions([wf])
        await registry.load()
        await self._keep_versions(registry.workflows.values())
        await scheduler.sync_declared(registry.workflows)
        self._warn_handlers()

        http = HttpSettings(
            read_timeout=self.settings.read_timeout_seconds,
            keepalive_timeout=self.settings.keepalive_seconds,
        )
        # the dashboard: the one place the daemon reaches ys.ui (tests/store/test_boundary.py)
        from ys.ui.server import Dashboard, install

        dashboard = Dashboard(self)
        app = make_app(Api(self, deliveries, mint=dashboard.mint), http)
        install(app, dashboard)
        runner = self._runner = web.AppRunner(app, handle_signals=False)
        loop = asyncio.get_running_loop()

        # A shared database: other daemons' commits concern us too (SQLite: nothing to
        # watch). Heard from before the socket answers, so a long poll's first read never
        # misses another daemon's commit made before this daemon listened.
        def due() -> None:
            loop.call_soon_threadsafe(dispatcher.poke)

        def changed(execution_id: str, status: str) -> None:
            loop.call_soon_threadsafe(self._changed, execution_id, status)

        store.watch(due, changed)
        await runner.setup()
        sock = self.paths.socket
        if sock.exists() or sock.is_symlink():
            sock.unlink()  # we hold the lock, so whatever answered here is gone: a stale socket
        old = os.umask(0o177)  # the socket is born 0600: no chmod race
        try:
            site = UnixSite(runner, str(sock), http)  # JSON answers for bad HTTP, read timeouts
            self.bound = True
            await site.start()
        finally:
            os.umask(old)
        registry.start_watching()
        start = getattr(launcher, "start", None)
        if start is not None:  # the fork server and its first spare, before the first claim
            await start()
        dispatcher.start()
        scheduler.start()
        if self.settings.database:  # `ys migrate` takes a home's own SQLite file's lock first
            database = self.settings.database_shown(self.paths.db)
            self._moved_watch = MovedWatch(store, self.hub, database, self._database_moved)
            self._moved_watch.start()
        if self._tracer is not None:
            self._tracer.start()

    def tracing_status(self) -> TracingJson:
        """Whether traces are exported, where to, and how many trees so far."""
        from ys import tracing as ys_tracing

        doc = ys_tracing.describe(self.settings.otel, self.settings.otel_env)
        doc["on"] = self._tracer is not None
        if self._tracer is not None:
            doc["exported"] = self._tracer.exported
            doc["failed_exports"] = self._tracer.failed_exports
        return doc

    def _make_tracer(self, store: Store) -> Tracer | None:
        """The trace exporter when tracing is asked for and the otel extra is there (asked for
        in config.toml without the extra, start-up has already refused: `check_tracing`)."""
        from ys import tracing as ys_tracing
        from ys.daemon import tracing

        if not ys_tracing.wanted(self.settings.otel, self.settings.otel_env):
            return None
        if not ys_tracing.installed():
            log.warning(
                "OTEL_* variables ask for traces, but the otel extra is missing: "
                "pip install 'ys[otel]'; running without tracing"
            )
            return None
        tracer = tracing.Tracer(store, self.paths.data, self.hub.call, self.settings.otel_env)
        log.info(
            "tracing: exporting execution traces (%s)",
            ys_tracing.describe(self.settings.otel, self.settings.otel_env).get("endpoint")
            or "console",
        )
        return tracer

    def _database_moved(self, exc: DatabaseMoved) -> None:
        """`ys migrate` marked the database moved while this daemon ran on it: no delivery
        more here (its workers killed now), said once, and the daemon stops (exit 3)."""
        self.moved = exc
        log.error("stopping: %s", exc.message)
        if self._dispatcher is not None:
            self._dispatcher.halt()
        self.grace = 0.0  # no delivery is given time to run on: it runs elsewhere now
        self.request_stop()

    async def _shutdown(self) -> None:
        """Stop what runs, in order; each piece only if start-up got that far."""
        if self._moved_watch is not None:
            await self._moved_watch.stop()
        self.hub.stop_waits()
        if self._dispatcher is not None:
            log.info(
                "stopping: no new deliveries; %d running get %.0fs",
                len(self._dispatcher.running),
                self.grace,
            )
        if self._scheduler is not None:
            await self._scheduler.stop()
        if self._tracer is not None:
            with contextlib.suppress(Exception):
                await self._tracer.stop()
        if self._dispatcher is not None:
            await self._dispatcher.stop(self.grace)
        close = getattr(self._launcher, "close", None)
        if close is not None:
            await close()
        if self._registry is not None:
            await self._registry.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.bound:
            try:
                self.paths.socket.unlink()
            except FileNotFoundError:
                pass
        self.hub.close()
        if self._store is not None:
            self._store.close()
        log.info("stopped")

    def _changed(self, execution_id: str, status: str) -> None:
        """Another daemon changed an execution (`status`: its status after): long polls on its
        history (`--follow`) read it again; where it ended, `ys wait` too, and a worker of it
        that runs here is killed (timed out, or cancelled at once, on another box). A step
        is not an end: a `ys wait` reads the record once, not at each step."""
        ended = status in TERMINAL
        self.hub.notify(execution_id, may_end=ended)
        if ended and self._dispatcher is not None:
            self._dispatcher.ended_elsewhere(execution_id)

    def _script_options(self, wf: Workflow) -> ScriptOptions:
        """What the database keeps of `wf`'s options for every daemon (docs/design.md,
        "Workflow options"): its limit, its attempts cap and its failure handler."""
        limit = wf.limit
        return ScriptOptions(
            concurrency=None if limit is None else limit.n,
            key=None if limit is None else limit.key,
            max_attempts=wf.max_attempts,
            on_failure=self.handler_for(wf.name),
        )

    def handler_for(self, workflow: str) -> str | None:
        """The workflow a failure of `workflow` admits: its own `on_failure`, else the
        folder-wide one; never itself (a handler that fails would only call itself again)."""
        wf = self._registry.get(workflow) if self._registry is not None else None
        handler = (wf.on_failure if wf is not None else None) or self.on_failure
        return None if handler == workflow else handler

    def handler_warning(self, wf: Workflow) -> str | None:
        """Why `wf`'s failure handler cannot run (it names no workflow), or None."""
        from ys.daemon.registry import missing_handler

        registry = self.registry
        return missing_handler(
            wf.name, wf.on_failure, self.on_failure, lambda n: registry.get(n) is not None
        )

    def _warn_handlers(self) -> None:
        """Log each failure handler that names no workflow, once (again only after it came
        and went)."""
        missing: dict[str, list[str]] = {}
        for wf in self.registry.workflows.values():
            if self.handler_warning(wf) is not None:
                missing.setdefault(wf.on_failure or self.on_failure or "", []).append(wf.name)
        for handler, names in sorted(missing.items()):
            if handler not in self._handlers_warned:
                log.warning(
                    "on_failure names %s, which is not a workflow in the folder; the failures "
                    "of %s admit %s executions that wait for it",
                    handler,
                    ", ".join(sorted(names)),
                    handler,
                )
        self._handlers_warned = set(missing)

    async def _keep_versions(self, workflows: Any) -> None:
        """Each runnable script's version: copied under <data>/scripts/ and recorded as its
        workflow's current one (what admissions record and unpinned deliveries run)."""
        from ys.daemon.versions import keep

        for wf in list(workflows):
            if wf.error is not None or wf.sha256 is None:
                continue
            if (
                await asyncio.to_thread(
                    keep, self.paths.data / "scripts", wf.path, wf.sha256, wf.kind
                )
                is None
            ):
                continue  # edited again meanwhile: the registry reports that version next
            try:
                await self.hub.call(
                    self.store.set_script,
                    wf.name,
                    wf.sha256,
                    pin=wf.pin,
                    timeout=wf.timeout,
                    options=self._script_options(wf),
                )
            except DaemonUnavailable:
                raise  # the database is away, not the script at fault: the registry tries again
            except YsError as exc:  # refused by the store: that script's error, not the daemon's
                log.error("workflow %s: its version was not recorded: %s", wf.name, exc.message)
                self.registry.set_error(wf.name, f"its options were refused: {exc.message}")

    async def _workflow_changed(self, wf: Workflow) -> None:
        """A script became runnable: executions that waited for it are woken; schedules it
        declares follow it."""
        await self.scheduler.sync_declared(self.registry.workflows)
        self._warn_handlers()
        now = self.registry.get(wf.name)
        if now is not None and now.error is None:
            n = await self.hub.call(self.store.wake_workflow, wf.name)
            if n:
                log.info("workflow %s is runnable: woke %d waiting executions", wf.name, n)
                self.dispatcher.poke()


class LockUnusable(Exception):
    """The lock file cannot be opened as one (a symlink, a folder): why, said to the user."""


def _lock(path: Path) -> tuple[Any, str | None]:
    """(the open file, None) with an exclusive lock on `path` and our pid in it, or (None,
    the pid that holds it, as written there)."""
    # Never through a symlink (a lock file planted beside a shared database must not make the
    # daemon truncate another file of the user's), private from its first byte.
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise LockUnusable(
            f"the daemon could not start: its lock file {path} cannot be used "
            f"({exc.strerror}); remove it if no daemon runs"
        ) from exc
    f = open(fd, "r+")  # noqa: SIM115 - held open until exit
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "unknown"
        f.close()
        return None, holder
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f, None


def acquire_lock(paths: Paths) -> tuple[list[Any], str | None]:
    """One daemon per database (the lock beside it) and per socket (the lock in its folder),
    held for the daemon's whole life; ([], why not) if another daemon holds either."""
    private_dir(paths.runtime)
    db_lock, holder = _lock(paths.lock)
    if db_lock is None:
        return [], (
            f"a daemon is already running for the database {paths.db} (pid {holder}); "
            f"stop it first (`ys daemon stop` with its YS_SOCKET, or kill {holder})"
        )
    try:
        sock_lock, holder = _lock(paths.socket_lock)
    except LockUnusable:
        release([db_lock])
        raise
    if sock_lock is None:
        release([db_lock])
        return [], (
            f"a daemon is already running for {paths.runtime} (pid {holder}), on "
            f"another database; stop it first (kill {holder})"
        )
    return [db_lock, sock_lock], None


def release(locks: list[Any]) -> None:
    """Free the locks; the pid is cleared first (while still held), so none names us after."""
    for f in locks:
        try:
            f.seek(0)
            f.truncate()
        except OSError:
            pass
        f.close()


def check_tracing(setting: bool | None) -> None:
    """`otel = true` (config.toml or YS_OTEL) without the otel extra: the daemon refuses to
    start (a setting it cannot honour); the OTEL_* variables alone only warn at start."""
    if setting:
        from ys.tracing import installed

        if not installed():
            from ys.errors import InvalidArgument

            raise InvalidArgument(
                "INVALID_ARGUMENT",
                "otel is true but the otel extra is not installed: pip install 'ys[otel]', "
                "or set otel = false",
            )


def refuse(exc: YsError) -> int:
    """The daemon does not start: one line on stderr (its code, what to do), its exit code."""
    message = exc.message.replace("\n", " ")
    sys.stderr.write(f"{exc.code}: {message}\n")
    return exc.exit_code


def run(paths: Paths, concurrency: int | None = None, database: str | None = None) -> int:
    """Run the daemon in the foreground until SIGTERM/SIGINT; returns the exit status: 1 when
    it could not start or stopped on an error, whose one-line reason is the last line on
    stderr (what `ys daemon start` and autostart print); bad settings are their error's exit
    code (2); a database `ys migrate` marked moved while it ran stops it with exit 3 (said
    in the log). `concurrency` and `database` are the command's options (None: the settings)."""
    from ys import settings as ys_settings
    from ys.daemon.identity import daemon_id
    from ys.daemon.logsetup import setup_logging

    try:
        settings = ys_settings.load(paths.config, concurrency=concurrency, database=database)
        if settings.database:
            from ys.store import require_driver

            require_driver(settings.database)  # refuse at once, not after taking the lock
        check_tracing(settings.otel)
    except YsError as exc:
        return refuse(exc)
    # daemon.log rotated and private, repeated errors rate-limited
    setup_logging(paths, settings.log_level, settings.daemon_log_max_bytes)
    os.umask(0o077)  # the database, logs and everything else the daemon writes are private
    for d in (paths.data, paths.logs):
        private_dir(d)
    paths.db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        locks, why = acquire_lock(paths)
    except LockUnusable as exc:
        locks, why = [], str(exc)
    if why is not None:
        sys.stderr.write(f"ys: {why}\n")
        return 1
    try:
        ident = daemon_id(paths)
    except YsError as exc:
        release(locks)
        return refuse(exc)
    daemon = Daemon(paths, settings, ident)
    try:
        kill_orphans(paths)
        asyncio.run(daemon.serve())
    except YsError as exc:  # the database could not be opened (unreachable, say)
        log.error("the daemon could not start: %s", exc.message)
        return refuse(exc)
    except asyncio.CancelledError:
        log.info("stopped before it had started")  # SIGTERM during start-up
    except Exception as exc:
        what = "stopped on an error" if daemon.serving else "could not start"
        log.exception("the daemon %s", what)
        sys.stderr.write(f"ys: the daemon {what}: {type(exc).__name__}: {exc}\n")
        return 1
    finally:
        release(locks)
    return 0 if daemon.moved is None else daemon.moved.exit_code
