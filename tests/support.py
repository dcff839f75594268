"""Helpers shared by every test folder (plain functions and constants; the fixtures built on
them are in tests/conftest.py). Import them as `from tests.support import ...`: the root
conftest puts the repository root on sys.path, so `tests` is importable from every folder.

- wait_until: poll a condition (never sleep to synchronise); T0: the explicit store clock.
- DaemonHandle / make_home: a real daemon in a temporary YS_HOME, always stopped by PID.
- prelude / write_script / lines / fixture_dir: workflow scripts that leave countable side
  effects in a folder of the test's own.
- events / kinds / claimed: an execution's history, every page; rows: raw database reads.
- Threads: fn(i) in n threads released together, each one's result or exception.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "workflows"

T0 = 1_000_000.0  # the explicit clock every store test uses

# What a daemon made by make_home runs with: short leases, retries and grace, so that tests of
# crashes and restarts finish in seconds.
DAEMON_ENV = {"YS_LEASE_SECONDS": "3", "YS_RETRY_BASE_SECONDS": "0.2", "YS_GRACE_SECONDS": "2"}


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 20.0,
    interval: float = 0.02,
    message: str = "condition",
) -> Any:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception as exc:  # the thing being waited for may not exist yet
            last_exc = exc
            value = None
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {message}"
        + (f" (last error: {last_exc!r})" if last_exc else "")
    )


class Threads:
    """fn(i) for i in range(n), each in its own thread, released together by a barrier (so
    their calls overlap). Start them where they must start (inside a held writer, say), then
    `results()` joins them: each one's return value, or the exception it raised."""

    def __init__(self, n: int, fn: Callable[[int], Any]) -> None:
        barrier = threading.Barrier(n)
        self._results: list[Any] = [None] * n

        def run(i: int) -> None:
            barrier.wait(timeout=30)
            try:
                self._results[i] = fn(i)
            except BaseException as exc:  # reported by the caller's assertions
                self._results[i] = exc

        self._threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in self._threads:
            t.start()

    def results(self, timeout: float = 60.0) -> list[Any]:
        for t in self._threads:
            t.join(timeout)
        assert not any(t.is_alive() for t in self._threads), "threads still running"
        return self._results


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def parse_iso(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


# -- a real daemon in a temporary home --------------------------------------------------------


class DaemonHandle:
    """A real daemon in a temp home. `env` is what a CLI or worker in this home would see.

    As a context manager it stops the daemon (and any worker left behind) on the way out:
    `with make_home(root) as h: yield h.start()`."""

    def __init__(self, home: Path, workflows: Path, extra_env: dict[str, str]) -> None:
        self.home = home
        self.workflows = workflows
        self.env = dict(os.environ)
        for k in (
            "YS_SOCKET",
            "YS_DB",
            "YS_EXECUTION_ID",
            "YS_DELIVERY_TOKEN",
            "YS_DATABASE",
            "YS_CONCURRENCY",
            "YS_ON_FAILURE",
            "YS_LOG_MAX_BYTES",
            # a terminal's size, which pytest-xdist's workers set (80x24): ys tables
            # written into a pipe are not cut to a terminal's width
            "COLUMNS",
            "LINES",
        ):
            self.env.pop(k, None)  # the caller's settings; `extra_env` may set them again
        self.env.update(
            YS_HOME=str(home),
            YS_WORKFLOWS=str(workflows),
            YS_AUTOSTART="0",
            YS_LOG_LEVEL="DEBUG",
            # a test's daemon never divides this box's cgroups (where they are delegated, it
            # would move itself and the test's processes): memory_max is RLIMIT_AS, unless a
            # test gives it a folder laid out as cgroupfs (tests/cron/test_run_environment.py)
            **{"YS_CGROUP_ROOT": str(home / "no-cgroup-v2"), **extra_env},
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []
        self._clients: list[Any] = []  # closed on the way out, none left to the GC

    def __enter__(self) -> DaemonHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self.close_clients()

    def close_clients(self) -> None:
        """Close every client `client()` made (an unclosed socket is a ResourceWarning, an
        error in this suite)."""
        for c in self._clients:
            c.close()
        self._clients.clear()

    @property
    def socket(self) -> Path:
        return self.home / "run" / "ys.sock"

    @property
    def db(self) -> Path:
        return self.home / "ys.db"

    def client(self, **kw: Any) -> Any:
        """A client of this daemon, closed when the home is (tests need not close it)."""
        from ys.client import Client

        c = Client(str(self.socket), **kw)
        self._clients.append(c)
        return c

    def start(self, concurrency: int = 4) -> DaemonHandle:
        log = open(self.home / "daemon-test.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ys.daemon", "run", "--concurrency", str(concurrency)],
            env=self.env,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.pids.append(self.proc.pid)
        proc = self.proc

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"daemon exited with {proc.returncode}: {self.log()[-2000:]}")
            from ys.client import Client

            try:
                with Client(str(self.socket), timeout=2) as c:
                    c.version()
                return True
            except Exception:
                return False

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if up():
                return self
            time.sleep(0.02)
        raise AssertionError("daemon did not answer in 30 s:\n" + self.log()[-2000:])

    def log(self) -> str:
        try:
            return (self.home / "daemon-test.log").read_text(errors="replace")
        except OSError:
            return ""

    def kill9(self) -> None:
        """SIGKILL the daemon only (its workers live on, as after a real crash)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a deadline; then kill any worker left behind. The
        clients stay usable (each connects again when next asked)."""
        self.close_clients()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.kill_workers()

    def kill_workers(self) -> None:
        workers = self.home / "run" / "workers"
        if workers.is_dir():
            for f in workers.iterdir():
                try:
                    os.killpg(int(f.name), signal.SIGKILL)
                except (ValueError, ProcessLookupError, PermissionError):
                    pass

    def write(self, name: str, source: str, mode: int = 0o600) -> Path:
        """Write a workflow script (dedented) atomically into the workflows folder."""
        path = self.workflows / name
        tmp = self.workflows / f".{name}.tmp"
        tmp.write_text(textwrap.dedent(source))
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        return path

    def worker_pids(self) -> list[int]:
        workers = self.home / "run" / "workers"
        return [int(f.name) for f in workers.iterdir()] if workers.is_dir() else []

    def ys(
        self,
        *args: str,
        input: str | None = None,
        timeout: float = 60,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the `ys` command line in this home."""
        e = dict(self.env)
        if env:
            e.update(env)
        return subprocess.run(
            [sys.executable, "-m", "ys", *args],
            env=e,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def make_home(root: Path, **extra_env: str) -> DaemonHandle:
    """A DaemonHandle in a new home `<root>/home` (0700) with an empty workflows folder
    (0700); lease 3 s, retry base 0.2 s, grace 2 s unless `extra_env` says otherwise. Not
    started. Its `env` is what the daemon and its workers see."""
    home = root / "home"
    home.mkdir(mode=0o700)
    workflows = home / "workflows"
    workflows.mkdir(mode=0o700)
    return DaemonHandle(home, workflows, {**DAEMON_ENV, **extra_env})


# -- workflow scripts with countable side effects ----------------------------------------------

_PRELUDE = '''\
import os
import pathlib
import sys
import time

import ys


def note(d, line):
    """A side effect the test counts: one line appended per call."""
    with open(os.path.join(d, "effects"), "a") as f:
        f.write(line + "\\n")
    return line


def block(d, name):
    """Note <name>:start, wait until the test creates <d>/<name>.go, note <name>:end."""
    note(d, name + ":start"@PID@)
    go = pathlib.Path(d, name + ".go")
    while not go.exists():
        time.sleep(0.01)
    note(d, name + ":end")
    return name


'''


def prelude(*, start_pid: bool) -> str:
    """The head of a workflow script that gives it two step functions: `note(d, line)` appends
    one line to `<d>/effects` (the test counts lines to prove a step ran exactly once), and
    `block(d, name)` notes `<name>:start` (`<name>:start:<pid>` with `start_pid`), waits until
    the test creates `<d>/<name>.go`, then notes `<name>:end`."""
    return _PRELUDE.replace("@PID@", ' + ":" + str(os.getpid())' if start_pid else "")


def write_script(daemon: DaemonHandle, name: str, body: str, prelude: str = "") -> Path:
    """Write workflow `<name>.py`: `prelude` followed by the (dedented) body."""
    return daemon.write(f"{name}.py", prelude + textwrap.dedent(body))


def lines(d: Path) -> list[str]:
    """The side-effect lines the workflow steps wrote to `<d>/effects` so far."""
    try:
        return (d / "effects").read_text().splitlines()
    except FileNotFoundError:
        return []


def fixture_dir(tmp_path: Path) -> Path:
    """A folder for one test's side effects and go-files (readable by its workflows)."""
    d = tmp_path / "fx"
    d.mkdir(exist_ok=True)
    os.chmod(d, 0o700)
    return d


# -- histories and raw reads -----------------------------------------------------------------


def events(client: Any, execution_id: str) -> list[dict[str, Any]]:
    """The whole history of an execution, every page."""
    out: list[dict[str, Any]] = []
    token = None
    while True:
        page = client.history(execution_id, limit=1000, page_token=token)
        out.extend(page["events"])
        token = page["next_page_token"]
        if not token:
            return out


def kinds(client: Any, execution_id: str) -> list[str]:
    return [e["kind"] for e in events(client, execution_id)]


def claimed(client: Any, execution_id: str) -> int:
    """How many deliveries the dispatcher started."""
    return kinds(client, execution_id).count("claimed")


def rows(path: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one query on the database file with a connection of its own, as another process
    would read it."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


# A workflow that holds its delivery open until the file params["gate"] exists (the test
# releases it).
GATE = """
    import os, time
    import ys

    def wait_for(path):
        while not os.path.exists(path):
            time.sleep(0.01)
        return True

    @ys.workflow
    def main(step, params):
        print("started", flush=True)
        step.run("gate", wait_for, params["gate"])
        print("released", flush=True)
        return "done"
"""
