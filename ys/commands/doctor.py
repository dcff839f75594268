"""`ys doctor`: check the home, the daemon, the database, the time zone and the environment
scripts will see. It never starts a daemon and never writes to the database.

This is the one command that opens the store itself (read-only, lazily, through
`ys.store.open_store`): the store's `health()` re-folds every execution's history and compares
it with the stored record, as recovery would.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ys.commands._opts import Json, add
from ys.commands._output import emit_json
from ys.paths import Paths
from ys.settings import ENV as SETTINGS_ENV

if TYPE_CHECKING:
    from ys.settings import Settings
    from ys.store.protocols import Health

# The YS_ variables ys reads (the settings' among them); any other is likely a typo.
KNOWN_ENV = {
    *SETTINGS_ENV.values(),
    "YS_HOME",
    "YS_DB",
    "YS_WORKFLOWS",
    "YS_SOCKET",
    "YS_AUTOSTART",
    "YS_NO_FAST_PATH",
    "YS_DEBUG",
    "YS_CRASH_POINTS",
    "YS_EXECUTION_ID",
    "YS_DELIVERY_TOKEN",
    "YS_WORKFLOW_FILE",
    "YS_ATTEMPT",
    "YS_TRACEPARENT",
}
PER_DELIVERY = (
    "YS_EXECUTION_ID",
    "YS_DELIVERY_TOKEN",
    "YS_WORKFLOW_FILE",
    "YS_ATTEMPT",
    "YS_TRACEPARENT",
)
MAX_LISTED = 5


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    level: str = "ok"  # ok | warning | error


def passed(name: str, detail: str) -> Check:
    return Check(name, True, detail)


def warning(name: str, detail: str) -> Check:
    return Check(name, True, detail, "warning")


def failed(name: str, detail: str) -> Check:
    return Check(name, False, detail, "error")


def _listed(items: list[str]) -> str:
    more = f" (and {len(items) - MAX_LISTED} more)" if len(items) > MAX_LISTED else ""
    return "; ".join(items[:MAX_LISTED]) + more


# -- paths and permissions -------------------------------------------------------------------


def _private(path: Path, what: str, mode: int) -> str | None:
    """Why `path` is not private to this user, or None."""
    st = path.lstat()
    if st.st_uid != os.getuid():
        return f"{what} {path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()})"
    if st.st_mode & 0o077:
        return (
            f"{what} {path} is mode {stat.S_IMODE(st.st_mode):04o}, not {mode:04o}; "
            f"run chmod {mode:o} {path}"
        )
    return None


def check_folders(paths: Paths) -> list[Check]:
    out = []
    for name, path in (
        ("home", paths.data),
        ("logs folder", paths.logs),
        ("runtime folder", paths.runtime),
    ):
        if not path.exists():
            out.append(warning(name, f"{path} does not exist yet (the daemon makes it)"))
            continue
        why = _private(path, name, 0o700)
        out.append(failed(name, why) if why else passed(name, f"{path} (0700)"))
    return out


def check_socket(paths: Paths) -> Check:
    sock = paths.socket
    if not (sock.exists() or sock.is_symlink()):
        return warning("socket", f"{sock} does not exist (no daemon runs)")
    if not stat.S_ISSOCK(sock.lstat().st_mode):
        return failed("socket", f"{sock} is not a socket; remove it")
    why = _private(sock, "socket", 0o600)
    return failed("socket", why) if why else passed("socket", f"{sock} (0600)")


def _unsafe(path: Path) -> str | None:
    st = path.stat()
    if st.st_uid != os.getuid():
        return f"{path} belongs to uid {st.st_uid}, not to you"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by others; run chmod go-w {path}"
    return None


def check_workflows(paths: Paths) -> Check:
    """The registry refuses to run scripts from a folder (or files) others could change."""
    folder = paths.workflows
    if not folder.is_dir():
        return warning("workflows folder", f"{folder} does not exist yet (the daemon makes it)")
    problems = [p for p in [_unsafe(folder.resolve())] if p]
    scripts = [
        p for p in sorted(folder.iterdir()) if not p.name.startswith((".", "_")) and p.is_file()
    ]
    for script in scripts:
        try:
            why = _unsafe(script.resolve())
        except OSError as exc:
            why = f"{script}: {exc.strerror}"
        if why:
            problems.append(why)
    for name, error in script_errors(paths):
        if not any(p in error for p in problems):  # a permission problem is listed once
            problems.append(f"{name}: {error}")
    if problems:
        return failed("workflows folder", _listed(problems))
    return passed(
        "workflows folder",
        f"{folder}: {len(scripts)} file(s), owned by you and "
        "not writable by others; every script loads, every failure handler exists",
    )


def script_errors(paths: Paths) -> list[tuple[str, str]]:
    """(name, error) of each script that does not load (what `ys workflows` lists), as the
    running daemon sees them, or, with none running, as it would load them."""
    from ys.client import Client
    from ys.errors import YsError

    try:
        with Client(str(paths.socket), timeout=10.0, autostart=False) as c:
            items = c.workflows()["workflows"]
    except (YsError, OSError, KeyError):
        import asyncio

        from ys.daemon.registry import Registry, missing_handler

        registry = Registry(paths.workflows)
        asyncio.run(registry.load())
        default = _folder_handler(paths)
        items = [
            w.to_json()
            | {
                "warning": missing_handler(
                    w.name, w.on_failure, default, lambda n: registry.get(n) is not None
                )
            }
            for w in registry.listing()
        ]
    # a failure handler that names no workflow runs, but each failure leaves an execution
    # waiting for ever: a problem to fix as much as a script that does not load
    return [
        (str(w["name"]), str(w.get("error") or w["warning"]))
        for w in items
        if w.get("error") or w.get("warning")
    ]


def _folder_handler(paths: Paths) -> str | None:
    """The folder-wide failure handler the settings name (None if they do not load)."""
    from ys.errors import YsError
    from ys.settings import load

    try:
        return load(paths.config).on_failure
    except YsError:
        return None


# -- the daemon ------------------------------------------------------------------------------


def check_daemon(paths: Paths, database: str | None = None) -> Check:
    from ys import __version__
    from ys.client import Client
    from ys.errors import YsError

    try:
        with Client(str(paths.socket), timeout=5.0, autostart=False) as c:
            info = c.version()
    except YsError as exc:
        if exc.code == "DAEMON_UNAVAILABLE":
            holder = lock_holder(paths.lock)
            if holder is not None:
                return failed(
                    "daemon",
                    f"pid {holder} holds the database lock {paths.lock} "
                    f"but does not answer on {paths.socket}: it is starting, "
                    f"or stuck; if it stays so, stop it with kill {holder}",
                )
            return warning(
                "daemon",
                f"no daemon answers on {paths.socket}; commands start one "
                "when needed (or `ys daemon start`)",
            )
        return failed("daemon", f"the daemon answered {exc.code}: {exc.message}")
    except OSError as exc:
        return failed("daemon", f"cannot reach {paths.socket}: {exc}")
    version = info.get("version")
    if version != __version__:
        return failed(
            "daemon",
            f"the daemon (pid {info.get('pid')}) runs ys {version}, this "
            f"command is ys {__version__}; restart it: ys daemon stop && "
            "ys daemon start",
        )
    shown = (info.get("database") or {}).get("location")
    if (info.get("database") or {}).get("reachable") is False:
        return failed(
            "daemon",
            f"the daemon (pid {info.get('pid')}) cannot reach its database {shown} (unreachable): "
            "it retries by itself; check that the server runs and answers",
        )
    if database is not None and shown is not None and shown != database:
        return failed(
            "daemon",
            f"the daemon on {paths.socket} uses the database {shown}, not "
            f"{database}; check YS_DATABASE, config.toml and YS_SOCKET",
        )
    served = (info.get("paths") or {}).get("db")
    if database is None and served and Path(served) != paths.db:
        return failed(
            "daemon",
            f"the daemon on {paths.socket} serves {served}, not {paths.db}; "
            "check YS_HOME, YS_DB and YS_SOCKET",
        )
    return passed(
        "daemon", f"ys {version}, pid {info.get('pid')}, up {_duration(info.get('uptime_seconds'))}"
    )


def lock_holder(lock: Path) -> int | None:
    """The pid written in the daemon's lock file, if that process still holds the lock. Read
    only: taking the lock, even for a moment, could make a daemon starting then refuse."""
    try:
        pid = int(lock.read_text().strip())
        inode = lock.stat().st_ino
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    try:  # Linux lists every lock: "1: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode> 0 EOF"
        with open("/proc/locks") as f:
            held = [ln.split() for ln in f]
    except OSError:
        return pid  # elsewhere, a live pid is the best we know
    for fields in held:
        if len(fields) > 5 and fields[4] == str(pid) and fields[5].rsplit(":", 1)[-1] == str(inode):
            return pid
    return None


def _duration(seconds: Any) -> str:
    from ys.durations import format_duration

    return format_duration(float(seconds or 0))


# -- the database ----------------------------------------------------------------------------


def check_database(paths: Paths) -> list[Check]:
    from ys.errors import YsError
    from ys.store import open_store

    db = paths.db
    if not db.exists():
        return [warning("database", f"{db} does not exist yet (the daemon makes it)")]
    old = os.umask(0o077)  # whatever the store creates beside the file stays private
    try:
        store = open_store(db, read_only=True)
        try:
            health = store.health()
            moved = None if health.error or "settings" not in health.rows else store.moved_to()
        finally:
            store.close()
    except YsError as exc:
        return [failed("database", f"{db}: {exc.message}")]
    finally:
        os.umask(old)
    if health.error is not None:
        return [failed("database", f"{db}: {health.error}")]
    if moved is not None:
        from ys.errors import DatabaseMoved

        return [failed("database", DatabaseMoved(str(db), moved).message)]
    problems = [why for f in health.files if (why := _private(f, "database file", 0o600))]
    if health.integrity:
        problems.append(f"integrity_check: {_listed(health.integrity)}")
    out = [
        failed("database", _listed(problems))
        if problems
        else passed("database", f"{db}: integrity ok, private"),
        check_schema(health),
    ]
    if health.mismatches:
        out.append(
            failed(
                "histories",
                f"{len(health.mismatches)} record(s) differ from their "
                f"history: {_listed(health.mismatches)}",
            )
        )
    else:
        out.append(
            passed(
                "histories",
                f"{health.executions} execution(s); every record equals its folded history",
            )
        )
    return out


def check_schema(health: Health) -> Check:
    """The schema's version and tables, as the store reports them."""
    version, expected, missing = (
        health.schema_version,
        health.schema_expected,
        health.missing_tables,
    )
    if version != expected or missing:
        return failed(
            "schema",
            f"version {version} of {expected}"
            + (f"; missing tables: {', '.join(missing)}" if missing else "")
            + "; start the daemon of this version to migrate",
        )
    rows = ", ".join(
        f"{name} {health.rows.get(name, 0)}"
        for name in ("executions", "events", "steps", "effects", "kv", "schedules")
    )
    return passed("schema", f"version {version}; rows: {rows}")


# -- time zone and environment ---------------------------------------------------------------


def check_timezone() -> Check:
    from zoneinfo import ZoneInfo

    from ys.cron import local_zone_name

    name = local_zone_name()
    try:
        ZoneInfo(name)
    except (ValueError, OSError, LookupError) as exc:
        return failed(
            "time zone",
            f"the local zone {name!r} does not load ({exc}); set TZ "
            "to an IANA name such as Europe/Paris",
        )
    return passed("time zone", f"{name} (schedules without --tz use it)")


def check_memory_limit(paths: Paths, settings: Settings | None) -> Check:
    """What holds a workflow's memory_max (ys.daemon.cgroups): the running daemon's choice, else
    what a daemon started from here would choose."""
    from ys.client import Client
    from ys.daemon.cgroups import ROOT, own_cgroup, probe
    from ys.errors import YsError

    try:
        with Client(str(paths.socket), timeout=5.0, autostart=False) as c:
            chosen = c.version().get("memory_limit")
    except (YsError, OSError):
        chosen = None
    if isinstance(chosen, dict) and chosen.get("detail"):
        return passed("memory limit", f"memory_max: {chosen['detail']} (the daemon's)")
    root = Path(settings.cgroup_root) if settings is not None else ROOT
    here = probe(root, own_cgroup(), os.getpid())
    return passed("memory limit", f"memory_max: {here.detail} (a daemon started from here)")


def check_tuning(settings: Settings) -> Check:
    """The daemon's tuning values (ys.settings) that differ from the defaults."""
    from ys.settings import shown

    return passed("tuning", shown(settings.tuning()))


def check_environment() -> Check:
    names = sorted(k for k in os.environ if k.startswith("YS_"))
    unknown = [k for k in names if k not in KNOWN_ENV]
    stray = [k for k in names if k in PER_DELIVERY]
    if unknown:
        return warning(
            "environment",
            f"unknown variable(s) {', '.join(unknown)}: ys does not read them (a typo?)",
        )
    if stray:
        return warning(
            "environment",
            f"{', '.join(stray)} set outside a workflow; the daemon sets these for each delivery",
        )
    from ys.settings import redact

    shown = (
        ", ".join(
            f"{k}={redact(os.environ[k]) if k == 'YS_DATABASE' else os.environ[k]}" for k in names
        )
        or "no YS_ variables set"
    )
    return passed("environment", shown)


def check_path() -> Check:
    """Shell workflows get the directory of the daemon's Python first on PATH, so `ys step`
    must be there; and a `ys` first on the user's PATH should be this one."""
    bindir = os.path.dirname(sys.executable)
    scripts = shutil.which("ys", path=bindir + os.pathsep + os.environ.get("PATH", os.defpath))
    if scripts is None:
        return failed(
            "ys for scripts",
            f"no ys command in {bindir} or on PATH, so shell "
            "workflows cannot run `ys step`; reinstall ys",
        )
    if Path(scripts).parent != Path(bindir):
        return warning(
            "ys for scripts",
            f"shell workflows would run {scripts}, from PATH, not the ys beside {sys.executable}",
        )
    yours = shutil.which("ys")
    if yours is not None and Path(yours).resolve() != Path(scripts).resolve():
        return warning(
            "ys for scripts", f"shell workflows run {scripts}, but `ys` on your PATH is {yours}"
        )
    return passed("ys for scripts", f"{scripts} (shell workflows get {bindir} first on PATH)")


def check_tracing(setting: bool | None) -> Check:
    """Whether the daemon exports traces (docs/design.md, "Traces"), and where to."""
    from ys.tracing import describe

    doc = describe(setting, os.environ)
    if doc.get("problem"):
        # asked for in config.toml: the daemon refuses to start; by OTEL_* alone: it warns
        return (failed if setting else warning)("tracing", doc["problem"])
    if not doc["on"]:
        return passed("tracing", "off (set OTEL_EXPORTER_OTLP_ENDPOINT or otel = true to export)")
    where = doc.get("endpoint") or doc.get("exporter")
    return passed("tracing", f"on: execution traces go to {where}")


def checks() -> list[Check]:
    from ys.commands._doctor_db import check_postgres, check_settings
    from ys.paths import resolve

    paths = resolve()
    settings_check, settings = check_settings(paths)
    if settings is not None and settings.database:
        database = settings.database_shown(paths.db)
        stored = check_postgres(settings.database)
    else:
        database, stored = None, check_database(paths)
    return [
        settings_check,
        *([check_tuning(settings)] if settings is not None else []),
        *check_folders(paths),
        check_socket(paths),
        check_workflows(paths),
        check_daemon(paths, database),
        *stored,
        check_timezone(),
        check_memory_limit(paths, settings),
        check_environment(),
        check_tracing(settings.otel if settings is not None else None),
        check_path(),
    ]


def doctor(json_: Json = False) -> None:
    """Check that ys is healthy: settings, paths, permissions, daemon, database, time zone,
    environment.

    config.toml and the YS_ settings must be valid; folders private (0700), the socket
    0600, the workflows folder yours and not writable by others, and every script in it
    must load (as `ys workflows` lists them: a syntax error, a bad declared schedule, ...);
    the daemon (if one runs) the same version as this command, on the same database; the
    database (the SQLite file, or PostgreSQL) intact, every record equal to its re-folded
    history. Never starts a daemon.
    Exits 0 when every check passes (warnings included), 1 when any fails. With --json:
    {"checks": [{"name", "ok", "detail", "level"}, ...]}.
    """
    results = checks()
    if json_:
        emit_json({"checks": [asdict(c) for c in results]})
    else:
        from ys.commands import _render

        marks = {"ok": ("ok  ", "green"), "warning": ("warn", "yellow"), "error": ("FAIL", "red")}
        lines = []
        for c in results:
            mark, style = marks[c.level]
            line = _render.Text(mark, style=style)
            line.append(f"  {c.name}: ", style="bold")
            line.append(c.detail)
            lines.append(line)
        _render.show(*lines)
        bad = [c.name for c in results if not c.ok]
        _render.note(
            f"{len(bad)} check(s) failed: {', '.join(bad)}" if bad else "all checks passed"
        )
    raise typer.Exit(0 if all(c.ok for c in results) else 1)


def register(app: typer.Typer) -> None:
    add(app, "doctor", doctor)
