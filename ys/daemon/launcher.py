"""How a delivery becomes a process. One small interface, so a warm launcher (fork from a
preloaded process, never carrying a database connection across the fork) can replace it.

A launched worker writes its output into pipes whose read ends the launcher hands back; the
dispatcher copies them into the delivery's log (ys.daemon.capture). No launcher gives asyncio
a pipe of its own to watch: asyncio's `wait()` would then also wait for every process that
inherited the pipe (a shell script's `cmd &`), and a delivery must end when its script exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ys.daemon.registry import Workflow
from ys.paths import Paths

log = logging.getLogger("ys.launcher")


class Proc(Protocol):
    """What the dispatcher needs of a worker's process."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


@dataclass(frozen=True)
class Worker:
    """A started delivery: its process (a session of its own: its pid is its process group)
    and the read ends of its output pipes, which the caller now owns."""

    proc: Proc
    output: int  # stdout and stderr of a Python worker; a shell script's stderr
    stdout: int | None = None  # a shell script's stdout (its last line is the result)


class Launcher(Protocol):
    async def launch(self, workflow: Workflow, env: dict[str, str], log_path: Path) -> Worker: ...


class SpawnLauncher:
    """A fresh interpreter per delivery, in its own process group (so a kill takes it all)."""

    async def launch(self, workflow: Workflow, env: dict[str, str], log_path: Path) -> Worker:
        shell = workflow.kind != "python"
        if shell:
            # Shell workflows call `ys step ...`: the ys next to this interpreter comes first.
            argv = [workflow.path]
            bindir = os.path.dirname(sys.executable)
            env = {**env, "PATH": bindir + os.pathsep + env.get("PATH", os.defpath)}
        else:
            argv = [sys.executable, "-m", "ys.worker"]
        output = os.pipe()  # non-inheritable: only the child's dup2 copies reach it
        stdout = os.pipe() if shell else output
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=stdout[1],
                stderr=output[1],
                env=env,
                cwd=workflow.folder or str(Path(workflow.path).parent),
                start_new_session=True,
            )
        except BaseException:
            for fd in {*output, *stdout}:
                os.close(fd)
            raise
        for fd in {output[1], stdout[1]}:
            os.close(fd)
        return Worker(proc, output[0], stdout[0] if shell else None)


def kill_group(proc: Proc, sig: int = signal.SIGKILL) -> None:
    """Signal the worker's process group (its session: a worker calls setsid first)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        if proc.returncode is None:  # just forked: not yet the leader of a group of its own
            try:
                os.kill(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
    except PermissionError:
        pass


class WarmProcess:
    """A worker forked by the fork server: what the dispatcher needs of a process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._done = asyncio.get_running_loop().create_future()

    def _exited(self, code: int) -> None:
        self.returncode = code
        if not self._done.done():
            self._done.set_result(code)

    async def wait(self) -> int:
        return int(await asyncio.shield(self._done))


class WarmLauncher:
    """Python deliveries fork from a preloaded interpreter (ys.forkserver), which takes the
    interpreter's start and the SDK's imports out of every delivery. Shell workflows, and any
    delivery while the fork server is unavailable, fall back to spawning."""

    def __init__(self) -> None:
        self.spawn = SpawnLauncher()
        self._server: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[dict[str, object]]] = {}
        self._procs: dict[int, WarmProcess] = {}
        self._early: dict[int, int] = {}  # exits reported before the fork reply was read
        self._next = 0
        self._lock = asyncio.Lock()

    async def _ensure(self) -> asyncio.subprocess.Process | None:
        async with self._lock:
            if self._server is not None and self._server.returncode is None:
                return self._server
            try:
                server = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "ys.forkserver",
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    start_new_session=True,
                )
                assert server.stdout is not None
                line = await asyncio.wait_for(server.stdout.readline(), 30)
                if b"ready" not in line:
                    raise RuntimeError(f"fork server said {line!r}")
            except Exception as exc:
                log.warning("warm launcher unavailable (%s); spawning workers", exc)
                return None
            self._server = server
            self._reader = asyncio.create_task(self._read(server), name="forkserver-reader")
            return server

    async def _read(self, server: asyncio.subprocess.Process) -> None:
        import json

        assert server.stdout is not None
        while True:
            line = await server.stdout.readline()
            if not line:
                break
            msg = json.loads(line)
            if "exit" in msg:
                proc = self._procs.pop(int(msg["exit"]), None)
                if proc is not None:
                    proc._exited(int(msg["code"]))
                else:
                    self._early[int(msg["exit"])] = int(msg["code"])
            elif "id" in msg:
                fut = self._pending.pop(int(msg["id"]), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        # The server is gone: workers it forked can no longer be waited for by exit code;
        # watch them by polling their pid instead.
        for pid, proc in list(self._procs.items()):
            asyncio.create_task(_poll_exit(proc))
            del self._procs[pid]
        for fut in self._pending.values():
            if not fut.done():
                fut.set_result({"error": "the fork server exited"})
        self._pending.clear()

    async def launch(self, workflow: Workflow, env: dict[str, str], log_path: Path) -> Worker:
        if workflow.kind != "python":
            return await self.spawn.launch(workflow, env, log_path)
        server = await self._ensure()
        if server is None or server.stdin is None:
            return await self.spawn.launch(workflow, env, log_path)
        # The worker's output comes through a FIFO beside its log: the server opens it to
        # write before it forks, so it is open on both ends once the reply says forked, and
        # the name can go.
        fifo = log_path.with_name(f".{log_path.name}.fifo")
        try:
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()
            os.mkfifo(fifo, 0o600)
        except OSError as exc:
            log.warning("no FIFO for a warm worker (%s); spawning this one", exc)
            return await self.spawn.launch(workflow, env, log_path)
        try:
            output = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                reply = await self._fork(server, env, workflow, fifo)
            except BaseException:
                os.close(output)
                raise
        finally:
            fifo.unlink(missing_ok=True)
        if "pid" not in reply:
            os.close(output)
            log.warning("no warm worker (%s); spawning this one", reply.get("error"))
            return await self.spawn.launch(workflow, env, log_path)
        proc = WarmProcess(int(reply["pid"]))  # type: ignore[call-overload]
        code = self._early.pop(proc.pid, None)
        if code is not None:
            proc._exited(code)
        else:
            self._procs[proc.pid] = proc
        return Worker(proc, output)

    async def _fork(
        self,
        server: asyncio.subprocess.Process,
        env: dict[str, str],
        workflow: Workflow,
        fifo: Path,
    ) -> dict[str, object]:
        """Ask the server for a worker; its reply, or {"error"} when it did not answer."""
        import json

        assert server.stdin is not None
        self._next += 1
        rid = self._next
        fut: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        req = {
            "id": rid,
            "env": env,
            "cwd": workflow.folder or str(Path(workflow.path).parent),
            "output": str(fifo),
        }
        try:
            server.stdin.write((json.dumps(req) + "\n").encode())
            await server.stdin.drain()
            return await asyncio.wait_for(fut, 30)
        except (OSError, TimeoutError) as exc:
            self._pending.pop(rid, None)
            return {"error": f"the fork server failed: {exc}"}

    async def close(self) -> None:
        server = self._server
        if server is not None and server.returncode is None and server.stdin is not None:
            server.stdin.close()
            try:
                await asyncio.wait_for(server.wait(), 5)
            except TimeoutError:
                server.kill()
        if self._reader is not None:
            self._reader.cancel()


async def _poll_exit(proc: WarmProcess) -> None:
    """For a worker whose parent (the fork server) is gone: wait until its pid disappears."""
    while True:
        try:
            os.kill(proc.pid, 0)
        except ProcessLookupError:
            proc._exited(-1)
            return
        await asyncio.sleep(0.2)


# -- worker pid files: one per running worker, so the next daemon can kill what this one left


def _workers_dir(paths: Paths) -> Path:
    return paths.runtime / "workers"


def _start_time(pid: int) -> str | None:
    """The process's start time (Linux /proc), to tell a reused PID from our worker."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[19]
    except (OSError, IndexError):
        return None


def record_worker(paths: Paths, pid: int, execution_id: str) -> None:
    """Note a started worker (with its start time, to tell a reused pid from it)."""
    d = _workers_dir(paths)
    d.mkdir(exist_ok=True, mode=0o700)
    (d / str(pid)).write_text(f"{_start_time(pid) or '-'} {execution_id}\n")


def forget_worker(paths: Paths, pid: int) -> None:
    """The worker has exited."""
    try:
        (_workers_dir(paths) / str(pid)).unlink()
    except FileNotFoundError:
        pass


def kill_orphans(paths: Paths) -> int:
    """At daemon start: kill the process group of every worker a previous daemon left
    running (recovery's first step); returns how many."""
    d = _workers_dir(paths)
    if not d.is_dir():
        return 0
    killed = 0
    for f in d.iterdir():
        try:
            pid = int(f.name)
            started, _, execution_id = f.read_text().strip().partition(" ")
        except (ValueError, OSError):
            f.unlink(missing_ok=True)
            continue
        now_started = _start_time(pid)
        alive = now_started is not None and (started in ("-", now_started))
        if alive:
            try:
                os.killpg(pid, signal.SIGKILL)
                killed += 1
                log.warning("killed worker %d of %s left by the previous daemon", pid, execution_id)
            except (ProcessLookupError, PermissionError):
                pass
        f.unlink(missing_ok=True)
    return killed


def make_launcher() -> Launcher:
    """The warm launcher unless YS_LAUNCHER=spawn."""
    if os.environ.get("YS_LAUNCHER", "warm") == "spawn":
        return SpawnLauncher()
    return WarmLauncher()
