"""Helpers for the schedule, shell-step, gc, service and doctor tests: small workflows, a home
with them written, a daemon spawned without waiting for it (to crash it), and schedules put
straight into the store with a cursor in the past, so a slot is due the moment a daemon
starts (no test waits for a real minute to pass).

Plain functions (no fixtures); the fixtures that use them are in conftest.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support import GATE, DaemonHandle, wait_until
from tests.support import make_home as empty_home

__all__ = [
    "DaemonHandle",
    "wait_until",
    "HELLO",
    "GATE",
    "make_home",
    "out_json",
    "spawn",
    "minute_slots",
    "daily_at",
    "put_schedule",
    "executions_of",
    "shell",
    "wait_status",
]

HELLO = """
    import ys

    @ys.workflow
    def main(step, params):
        return step.run("greet", lambda: f"hello {params.get('n', 0)}")
"""


WORKFLOWS = {"hello.py": HELLO, "gate.py": GATE}


def make_home(root: Path, **env: str) -> DaemonHandle:
    """A home under `root` with WORKFLOWS written (before any daemon loads the folder)."""
    h = empty_home(root, **env)
    for name, source in WORKFLOWS.items():
        h.write(name, source)
    return h


def shell(h: DaemonHandle, name: str, body: str) -> Path:
    """A `#!/bin/sh` workflow (executable, private) with `set -e`."""
    return h.write(name, "#!/bin/sh\nset -e\n" + body.strip() + "\n", mode=0o700)


def out_json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def spawn(h: DaemonHandle) -> subprocess.Popen[bytes]:
    """Start a daemon without waiting for it to answer (it may crash before it can)."""
    log = open(h.home / "daemon-test.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "ys.daemon", "run"],
        env=h.env,
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    h.proc = proc
    h.pids.append(proc.pid)
    return proc


def minute_slots(n: int, now: float) -> list[float]:
    """The last `n` whole minutes up to `now`, oldest first (all due at `now`)."""
    last = now - now % 60
    return [last - 60 * i for i in reversed(range(n))]


def daily_at(slots: list[float]) -> str:
    """A UTC cron expression that names these minutes (of at most two consecutive hours) and
    no other slot within the next 55 minutes, so no test sees a fire it did not plan."""
    ds = [dt.datetime.fromtimestamp(s, tz=dt.UTC) for s in slots]
    minutes = ",".join(str(m) for m in sorted({d.minute for d in ds}))
    hours = ",".join(str(h) for h in sorted({d.hour for d in ds}))
    return f"{minutes} {hours} * * *"


def put_schedule(h: DaemonHandle, name: str, workflow: str, slots: list[float], **kw: Any) -> None:
    """A schedule firing at `slots`, its cursor just before the first (all due at once),
    written into the home's database before a daemon starts."""
    from ys.store.sqlite import SqliteStore

    store = SqliteStore(h.db)
    try:
        store.schedule_add(name, workflow, daily_at(slots), tz="UTC", now=slots[0] - 30, **kw)
    finally:
        store.close()
    os.chmod(h.db, 0o600)


def executions_of(h: DaemonHandle, prefix: str) -> dict[str, dict[str, Any]]:
    with h.client(timeout=5) as c:
        items = c.list(limit=1000)["executions"]
    return {r["execution_id"]: r for r in items if r["execution_id"].startswith(prefix)}


def wait_status(
    h: DaemonHandle, execution_id: str, *statuses: str, timeout: float = 20
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        with h.client(timeout=5) as c:
            record: dict[str, Any] = c.get(execution_id)
        return record if record["status"] in statuses else None

    result: dict[str, Any] = wait_until(
        check, timeout=timeout, message=f"{execution_id} to be {statuses}"
    )
    return result
