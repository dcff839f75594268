"""`ys daemon install|uninstall`: run the daemon as a service of the user's session manager,
a systemd user unit on Linux or a launchd agent on macOS. Neither needs (or starts) a daemon.

The service runs `<this python> -m ys.daemon run` with the YS_HOME, YS_WORKFLOWS, YS_DB and
YS_SOCKET of the current environment, so it serves the same home as the command that
installed it.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import typer

from ys.commands._opts import Json, add
from ys.commands._output import emit_json, fail

UNIT = "ys.service"
LABEL = "ys.daemon"
CARRIED = ("YS_HOME", "YS_WORKFLOWS", "YS_DB", "YS_SOCKET")


def manager(platform: str | None = None) -> str:
    p = platform or sys.platform
    if p == "darwin":
        return "launchd"
    if p.startswith("linux"):
        return "systemd"
    fail(
        "INVALID_ARGUMENT",
        f"ys daemon install knows systemd (Linux) and launchd (macOS), not {p}",
        hint="run `ys daemon run` from your own service manager",
    )


def exec_argv() -> list[str]:
    return [sys.executable, "-m", "ys.daemon", "run"]


def environment() -> dict[str, str]:
    """The YS_ paths in force, made absolute (the service does not run in this folder)."""
    return {k: str(Path(v).expanduser().absolute()) for k in CARRIED if (v := os.environ.get(k))}


def unit_path() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user" / UNIT


def plist_path() -> Path:
    return Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def service_path(kind: str) -> Path:
    return unit_path() if kind == "systemd" else plist_path()


def _word(text: str, exec_line: bool) -> str:
    """One word of a systemd line: `%` (specifiers) and, in Exec lines, `$` (variables) are
    escaped; a word with spaces, quotes or backslashes is quoted."""
    text = text.replace("%", "%%")
    if exec_line:
        text = text.replace("$", "$$")
    if re.fullmatch(r"[\w@%$+=:,./-]+", text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_unit(argv: list[str], env: dict[str, str]) -> str:
    lines = [
        "# Written by `ys daemon install`; `ys daemon uninstall` removes it.",
        "[Unit]",
        "Description=ys: durable workflows daemon",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(_word(a, True) for a in argv),
        "Restart=on-failure",
        "RestartSec=5",
        # SIGTERM goes to the daemon alone: it gives running deliveries their grace period and
        # stops its workers itself; whatever is left after the timeout is killed.
        "KillMode=mixed",
        "TimeoutStopSec=60",
        # its cgroup is the daemon's to divide: a memory_max is a cgroup v2 memory.max of each
        # delivery's own (ys.daemon.cgroups), not RLIMIT_AS
        "Delegate=memory",
        *(f"Environment={_word(f'{k}={v}', False)}" for k, v in sorted(env.items())),
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ]
    return "\n".join(lines)


def launchd_plist(argv: list[str], env: dict[str, str], log: Path) -> bytes:
    import plistlib

    agent: dict[str, Any] = {
        "Label": LABEL,
        "ProgramArguments": argv,
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},  # restart it when it fails, as systemd does
        "ProcessType": "Background",
        "StandardOutPath": str(log),
        "StandardErrorPath": str(log),
    }
    if env:
        agent["EnvironmentVariables"] = dict(sorted(env.items()))
    return plistlib.dumps(agent)


def _write(path: Path, data: bytes) -> bool:
    """Write atomically; returns whether a file was there before."""
    path.parent.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return existed


def _enable(kind: str, path: Path) -> list[str]:
    if kind == "systemd":
        return [
            "systemctl --user daemon-reload && systemctl --user enable --now ys",
            "loginctl enable-linger $USER   # keep it running while you are logged out "
            "(servers, boxes without a login)",
        ]
    return [f'launchctl bootstrap gui/$(id -u) "{path}"']


def _disable(kind: str) -> list[str]:
    if kind == "systemd":
        return ["systemctl --user stop ys; systemctl --user daemon-reload"]
    return [f"launchctl bootout gui/$(id -u)/{LABEL}"]


def install(json_: Json = False) -> None:
    """Install the daemon as a user service: a systemd user unit, or a launchd agent on macOS.

    Writes ~/.config/systemd/user/ys.service (under XDG_CONFIG_HOME when set) or
    ~/Library/LaunchAgents/ys.daemon.plist, running this ys's daemon with the YS_HOME,
    YS_WORKFLOWS, YS_DB and YS_SOCKET set now, restarted when it fails; prints its path and
    how to enable it. Installing again rewrites it. Needs no running daemon.
    """
    from ys.paths import resolve

    kind = manager()
    argv, env = exec_argv(), environment()
    path = service_path(kind)
    data = (
        systemd_unit(argv, env).encode()
        if kind == "systemd"
        else launchd_plist(argv, env, resolve().daemon_log)
    )
    replaced = _write(path, data)
    enable = _enable(kind, path)
    if json_:
        emit_json(
            {
                "path": str(path),
                "manager": kind,
                "exec": argv,
                "environment": env,
                "replaced": replaced,
                "enable": enable,
            }
        )
        return
    sys.stdout.write(f"{path}\n")
    from ys.commands import _render

    what = "systemd user unit" if kind == "systemd" else "launchd agent"
    _render.note(
        f"{'rewrote' if replaced else 'wrote'} the {what} {path}, which runs "
        f"`{' '.join(argv)}`" + (f" with {', '.join(sorted(env))}" if env else "")
    )
    _render.note("enable and start it (stop a daemon started by hand first: `ys daemon stop`):")
    for line in enable:
        _render.note(f"  {line}")


def uninstall(json_: Json = False) -> None:
    """Remove the user service that `ys daemon install` wrote, and say how to stop it.

    Exits 0 with a note when none is installed. Needs no running daemon and stops none.
    """
    kind = manager()
    path = service_path(kind)
    removed = path.exists() or path.is_symlink()
    if removed:
        path.unlink()
        if kind == "systemd":
            # what `systemctl --user enable` linked; dangling now
            wants = path.parent / "default.target.wants" / UNIT
            if wants.is_symlink() and not wants.exists():
                wants.unlink()
    disable = _disable(kind) if removed else []
    if json_:
        emit_json({"path": str(path), "manager": kind, "removed": removed, "disable": disable})
        return
    from ys.commands import _render

    if not removed:
        _render.note(f"no ys service is installed (nothing at {path}); nothing to do")
        return
    sys.stdout.write(f"{path}\n")
    _render.note(f"removed {path}; if the service still runs, stop it with:")
    for line in disable:
        _render.note(f"  {line}")


def register(app: typer.Typer) -> None:
    from ys.commands.daemon import daemon_app

    add(daemon_app, "install", install)
    add(daemon_app, "uninstall", uninstall)
