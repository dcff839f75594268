"""Shared test helpers: wait_until (never sleep to synchronise), and a real daemon in a
temporary YS_HOME that is always stopped by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "workflows"


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02,
               message: str = "condition") -> Any:
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
    raise AssertionError(f"timed out after {timeout}s waiting for {message}"
                         + (f" (last error: {last_exc!r})" if last_exc else ""))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


class DaemonHandle:
    """A real daemon in a temp home. `env` is what a CLI or worker in this home would see."""

    def __init__(self, home: Path, workflows: Path, extra_env: dict[str, str]) -> None:
        self.home = home
        self.workflows = workflows
        self.env = dict(os.environ)
        self.env.update(YS_HOME=str(home), YS_WORKFLOWS=str(workflows), YS_AUTOSTART="0",
                        YS_LOG_LEVEL="DEBUG", **extra_env)
        for k in ("YS_SOCKET", "YS_DB", "YS_EXECUTION_ID", "YS_DELIVERY_TOKEN"):
            self.env.pop(k, None)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []

    @property
    def socket(self) -> Path:
        return self.home / "run" / "ys.sock"

    @property
    def db(self) -> Path:
        return self.home / "ys.db"

    def client(self, **kw: Any) -> Any:
        from ys.client import Client

        return Client(str(self.socket), **kw)

    def start(self, concurrency: int = 4) -> DaemonHandle:
        log = open(self.home / "daemon-test.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ys.daemon", "run", "--concurrency", str(concurrency)],
            env=self.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.pids.append(self.proc.pid)
        proc = self.proc

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"daemon exited with {proc.returncode}: {self.log()[-2000:]}")
            try:
                self.client(timeout=2).version()
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
        """SIGTERM, then SIGKILL after a deadline; then kill any worker left behind."""
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

    def ys(self, *args: str, input: str | None = None, timeout: float = 60,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run the `ys` command line in this home."""
        e = dict(self.env)
        if env:
            e.update(env)
        return subprocess.run(
            [sys.executable, "-m", "ys", *args], env=e, input=input, capture_output=True,
            text=True, timeout=timeout,
        )


@pytest.fixture
def ys_home(tmp_path: Path) -> Iterator[DaemonHandle]:
    """A temporary home with an empty workflows folder (0700); no daemon started."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    workflows = home / "workflows"
    workflows.mkdir(mode=0o700)
    h = DaemonHandle(home, workflows, {"YS_LEASE_SECONDS": "3", "YS_RETRY_BASE_SECONDS": "0.2",
                                       "YS_GRACE_SECONDS": "2"})
    try:
        yield h
    finally:
        h.stop()


@pytest.fixture
def daemon(ys_home: DaemonHandle) -> DaemonHandle:
    """A running daemon in a temporary home."""
    return ys_home.start()
