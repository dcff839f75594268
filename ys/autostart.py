"""Start the daemon in the background and return once it answers.

Concurrent callers start exactly one daemon: they serialise on a start lock, and each checks
whether a daemon answers before spawning one. Standard library only (the CLI imports this).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ys.errors import DaemonUnavailable
from ys.paths import Paths, resolve


def ping(socket_path: Path, timeout: float = 2.0) -> dict[str, Any] | None:
    from ys.client import Transport

    try:
        info: dict[str, Any] = Transport(str(socket_path), timeout=timeout).request(
            "GET", "/v1/version"
        )
        return info
    except (DaemonUnavailable, OSError):
        return None
    except Exception:
        return None


def ensure_daemon(paths: Paths | None = None) -> None:
    """Start a daemon unless one answers; YS_AUTOSTART=0 turns this off."""
    paths = paths or resolve()
    if os.environ.get("YS_AUTOSTART", "1") == "0":
        raise DaemonUnavailable(
            "DAEMON_UNAVAILABLE",
            f"no daemon answers on {paths.socket} and YS_AUTOSTART=0; start it with "
            "`ys daemon start`",
        )
    start_daemon(paths)


def start_daemon(
    paths: Paths, concurrency: int | None = None, timeout: float = 30.0, database: str | None = None
) -> int:
    """Spawn `ys daemon run` detached; returns its PID (or the running daemon's). A database
    URL goes in the child's environment (YS_DATABASE), never on its command line: `ps` would
    show any password in it to every user of the box."""
    paths.runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(paths.runtime / "start.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        info = ping(paths.socket)
        if info is not None:
            return int(info["pid"])
        paths.data.mkdir(parents=True, exist_ok=True, mode=0o700)
        argv = [sys.executable, "-m", "ys.daemon", "run", "--workflows", str(paths.workflows)]
        if concurrency is not None:
            argv += ["--concurrency", str(concurrency)]
        env = dict(os.environ)
        env["YS_SOCKET"] = str(paths.socket)
        env["YS_DB"] = str(paths.db)
        if database is not None:
            env["YS_DATABASE"] = database
        # 0600 from the first byte, whatever the caller's umask: the daemon's log is private
        fd = os.open(paths.daemon_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with open(fd, "ab") as logf:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=logf,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = ping(paths.socket, timeout=1.0)
            if info is not None:
                return int(info["pid"])
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        tail = ""
        try:
            tail = paths.daemon_log.read_text(errors="replace").strip().splitlines()[-1]
        except (OSError, IndexError):
            pass
        raise DaemonUnavailable(
            "DAEMON_UNAVAILABLE",
            f"the daemon did not start ({tail or 'no output'}); see {paths.daemon_log}",
        )
