"""`ys daemon run|start|stop|status`: the daemon's life. `stop` and `status` never start one.

Other modules add subcommands (`ys daemon install`) with `add(daemon_app, name, fn)`.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ys.commands._opts import Json, add
from ys.commands._output import client, emit_json, fail

daemon_app = typer.Typer(
    help="Run, start, stop and inspect the daemon.",
    no_args_is_help=True,
    suggest_commands=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

Workflows = Annotated[
    str | None,
    typer.Option(
        "--workflows",
        metavar="DIR",
        help="The workflows folder (default: YS_WORKFLOWS, or workflows/ in the config folder).",
        show_default=False,
    ),
]
Concurrency = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        min=1,
        help="How many deliveries may run at once (default: "
        "YS_CONCURRENCY, concurrency in config.toml, or 4).",
        show_default=False,
    ),
]
Database = Annotated[
    str | None,
    typer.Option(
        "--database",
        metavar="URL",
        help="A PostgreSQL URL (postgresql://user@host:port/db) to "
        "share with other daemons (default: YS_DATABASE, "
        "database in config.toml, or the SQLite file).",
        show_default=False,
    ),
]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (its parent has not reaped it yet) has stopped all the same
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def run(
    workflows: Workflows = None, concurrency: Concurrency = None, database: Database = None
) -> None:
    """Run the daemon in the foreground until SIGTERM or Ctrl-C.

    This is what systemd or launchd runs. Its log goes to stderr. Settings that are wrong
    (config.toml, YS_DATABASE, ...) stop it at once with exit 2.
    """
    from ys.daemon.main import run as run_daemon
    from ys.paths import resolve

    raise typer.Exit(run_daemon(resolve(workflows), concurrency=concurrency, database=database))


def start(
    workflows: Workflows = None,
    concurrency: Concurrency = None,
    database: Database = None,
    json_: Json = False,
) -> None:
    """Start the daemon in the background and print its pid once it answers.

    If one already answers, print its pid and leave it as it is (exit 0, as `systemctl start`
    of a running unit): it keeps the settings it started with, and --workflows,
    --concurrency or --database given now are not applied (stderr says so and how to
    restart it with them; --json lists them in not_applied). The database URL reaches the
    daemon through its environment, never its command line (where `ps` shows it).
    """
    from ys import settings
    from ys.autostart import ping, start_daemon
    from ys.paths import resolve

    paths = resolve(workflows)
    # refuse bad settings here, with their own message, rather than as a daemon that died
    settings.load(paths.config, concurrency=concurrency, database=database)
    running = ping(paths.socket)
    pid = (
        int(running["pid"])
        if running
        else start_daemon(paths, concurrency=concurrency, database=database)
    )
    asked = _asked(workflows, concurrency, database) if running else []
    if json_:
        out: dict[str, Any] = {"pid": pid, "started": running is None, "socket": str(paths.socket)}
        if running:
            out["not_applied"] = [flag for flag, _ in asked]
        emit_json(out)
        return
    sys.stdout.write(f"{pid}\n")
    from ys.commands import _render

    if running and asked:
        flags = " ".join(flag for flag, _ in asked)
        again = " ".join(f"{flag} {shown}" for flag, shown in asked)
        _render.note(
            f"a daemon already runs (pid {pid}) on {paths.socket} and keeps its settings: "
            f"{flags} not applied; to apply, restart it: ys daemon stop && ys daemon start "
            f"{again}"
        )
    elif running:
        _render.note(f"a daemon already runs (pid {pid}) on {paths.socket}")
    else:
        _render.note(
            f"started the daemon (pid {pid}) on {paths.socket}; "
            f"workflows in {paths.workflows}; log in {paths.daemon_log}"
        )


def _asked(
    workflows: str | None, concurrency: int | None, database: str | None
) -> list[tuple[str, str]]:
    """The settings given on the command line, each as (flag, value to show): the database
    URL is shown as URL (it may hold a password)."""
    import shlex

    given = [("--workflows", workflows), ("--concurrency", concurrency), ("--database", database)]
    return [
        (flag, "URL" if flag == "--database" else shlex.quote(str(value)))
        for flag, value in given
        if value is not None
    ]


def stop(
    timeout: Annotated[
        str,
        typer.Option(
            "--timeout",
            metavar="DURATION",
            help="Wait this long for it to exit (90, 90s, 10m, ...), then exit 6.",
        ),
    ] = "30s",
    json_: Json = False,
) -> None:
    """Stop the daemon gracefully and return once it has exited.

    Running deliveries get a grace period (YS_GRACE_SECONDS, 10 s) to finish; the daemon
    stops the rest, and they resume at the next start. Exits 5 if no daemon answers.
    """
    from ys.autostart import ping
    from ys.durations import parse_duration
    from ys.errors import DaemonUnavailable

    seconds = parse_duration(timeout, "--timeout")
    c = client(autostart=False, timeout=10)
    try:
        info = c.shutdown()
    except DaemonUnavailable:
        fail(
            "DAEMON_UNAVAILABLE",
            f"no daemon answers on {c.socket_path}; there is nothing to stop",
            hint="`ys daemon status` says whether one runs",
        )
    finally:
        c.close()
    pid = int(info["pid"])
    deadline = time.monotonic() + seconds
    while _alive(pid) or ping(Path(c.socket_path), timeout=1.0) is not None:
        if time.monotonic() > deadline:
            fail(
                "TIMEOUT",
                f"the daemon (pid {pid}) is still running after {timeout}",
                hint=f"wait, or kill it with `kill {pid}`",
            )
        time.sleep(0.05)
    if json_:
        emit_json({"pid": pid, "stopped": True})
        return
    from ys.commands import _render

    _render.note(f"stopped the daemon (pid {pid})")


def _status_rows(info: dict[str, Any]) -> Any:
    from ys.commands import _render
    from ys.durations import format_duration

    g = _render.grid()
    _render.add_row(g, "version", str(info.get("version")))
    _render.add_row(g, "pid", str(info.get("pid")))
    _render.add_row(g, "daemon id", str(info.get("daemon_id")))
    database = info.get("database") or {}
    shown = f"{database.get('location')} ({database.get('kind')})"
    if database.get("reachable") is False:
        shown += ": unreachable, retrying (reads answer DATABASE_UNAVAILABLE meanwhile)"
    _render.add_row(g, "database", shown)
    _render.add_row(g, "uptime", format_duration(float(info.get("uptime_seconds") or 0)))
    _render.add_row(g, "started", _render.local(info.get("started_at")))
    _render.add_row(
        g, "running", f"{info.get('running', 0)} of {info.get('concurrency', '?')} deliveries"
    )
    tracing = info.get("tracing") or {}
    if tracing.get("on"):
        where = tracing.get("endpoint") or tracing.get("exporter")
        _render.add_row(g, "tracing", f"on: {where} ({tracing.get('exported', 0)} traces sent)")
    else:
        _render.add_row(g, "tracing", tracing.get("problem") or "off")
    if "settings" in info:
        from ys.settings import shown as tuning_shown

        _render.add_row(g, "settings", tuning_shown(info["settings"]))
    for key, value in (info.get("paths") or {}).items():
        _render.add_row(g, key, str(value))
    return g


def status(json_: Json = False) -> None:
    """Show whether the daemon runs: pid, version, uptime, the settings that differ from the
    defaults, paths (--json: every setting). Exits 5 if none answers."""
    with client(autostart=False, timeout=5) as c:
        info = c.version()
    if json_:
        emit_json(info)
        return
    from ys.commands import _render

    _render.panel("ys daemon", _status_rows(info))


for _name, _fn in (("run", run), ("start", start), ("stop", stop), ("status", status)):
    add(daemon_app, _name, _fn)


def register(app: typer.Typer) -> None:
    app.add_typer(daemon_app, name="daemon")
