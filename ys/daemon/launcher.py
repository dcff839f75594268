"""How a delivery becomes a process. One small interface, so a warm launcher (fork from a
preloaded process, never carrying a database connection across the fork) can replace it.

A launched worker writes its output into pipes whose read ends the launcher hands back; the
dispatcher copies them into the delivery's log (ys.daemon.capture). No launcher gives asyncio
a pipe of its own to watch: asyncio's `wait()` would then also wait for every process that
inherited the pipe (a shell script's `cmd &`), and a delivery must end when its script exits.

A Python delivery also gets its channel (ys/worker/channel.py): the launcher writes the launch (the
delivery and its run state) on a socket pair and hands the dispatcher its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import logging
import math
import os
import signal
import socket
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ys import runenv
from ys.daemon.registry import Workflow
from ys.paths import WORKFLOW_UMASK
from ys.worker.wire import Launch, Limits, ServerMessage, WarmLaunch

log = logging.getLogger("ys.launcher")
LAUNCH_CHUNK = 65536  # the launch's first bytes, sent with the output pipe


class Proc(Protocol):
    """What the dispatcher needs of a worker's process."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


@dataclass(frozen=True)
class Worker:
    """A started delivery: its process (a session of its own: its pid is its process group),
    the read ends of its output pipes, and its channel, which the caller now owns."""

    proc: Proc
    output: int  # stdout and stderr of a Python worker; a shell script's stderr
    stdout: int | None = None  # a shell script's stdout (its last line is the result)
    channel: socket.socket | None = None  # a Python worker's channel, its launch written
    lifeline: int | None = None  # a shell script's: the write end of its guard's pipe (ys.guard)


class Launcher(Protocol):
    async def launch(
        self,
        workflow: Workflow,
        env: dict[str, str],
        log_path: Path,
        start: Launch | None = None,
        lease_until: float = math.inf,
        cgroup: Path | None = None,
    ) -> Worker:
        """Start the delivery's process with the daemon's environment and `env` (the
        delivery's own variables) over it; `start` is a Python worker's launch (its channel's
        first line), None for a shell script, whose guard stops it at `lease_until`
        (time.monotonic()) unless told of a renewal on its lifeline. `cgroup`: the delivery's
        cgroup v2 (ys.daemon.cgroups), which the worker enters before it runs anything."""
        ...


def _launch_line(start: Launch | WarmLaunch | None) -> bytes:
    return json.dumps(start or {}, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _cwd(workflow: Workflow) -> str:
    """The `cwd` option, else the workflows folder."""
    return workflow.options.cwd or workflow.folder or str(Path(workflow.path).parent)


def _run_env(workflow: Workflow, env: dict[str, str]) -> dict[str, str]:
    """The delivery's variables over its `env_file`'s, read now (an unreadable one fails the
    start: OSError)."""
    if workflow.options.env_file is None:
        return env
    return {**runenv.read_env_file(workflow.options.env_file), **env}


def _limits(workflow: Workflow, cgroup: Path | None) -> Limits:
    """Its nice value and memory limit: its cgroup, else (or should that fail) RLIMIT_AS."""
    return {
        "nice": workflow.options.nice,
        "memory_max": workflow.options.memory_max,
        "cgroup": None if cgroup is None else str(cgroup),
    }


# A shell script starts with its guard (ys.guard) beside it, in its session: /bin/sh starts
# the guard in the background with the lifeline as its stdin, then becomes the script (exec:
# the script keeps the pid the daemon was given). Arguments: the script, the interpreter, the
# guard, the lease's end.
GUARDED = 'exec 3<&0 </dev/null; "$1" -I -S "$2" "$3" <&3 >/dev/null 3<&- & exec "$0" 3<&-'
GUARD = str(Path(__file__).resolve().parent.parent / "guard.py")


def _umask(workflow: Workflow) -> int:
    """The workflow's `umask` option, else cron's 022, never the daemon's own 0077."""
    return WORKFLOW_UMASK if workflow.options.umask is None else workflow.options.umask


def _preexec(workflow: Workflow, cgroup: Path | None) -> Callable[[], None] | None:
    """Its nice value and memory limit, set in the child before its exec."""
    limits = _limits(workflow, cgroup)
    if all(v is None for v in (limits["nice"], limits["memory_max"], limits["cgroup"])):
        return None
    return functools.partial(runenv.apply_limits, **limits)


class SpawnLauncher:
    """A fresh interpreter per delivery, in its own process group (so a kill takes it all)."""

    async def launch(
        self,
        workflow: Workflow,
        env: dict[str, str],
        log_path: Path,
        start: Launch | None = None,
        lease_until: float = math.inf,
        cgroup: Path | None = None,
    ) -> Worker:
        shell = workflow.kind != "python"
        # The daemon's environment copied for the child, not read as a setting (ys.settings
        # reads those, once): the one use of os.environ under ys/daemon (tests/store/test_boundary.py)
        env = {**os.environ, **_run_env(workflow, env)}
        ours = theirs = None
        pass_fds: tuple[int, ...] = ()
        stdin: int = asyncio.subprocess.DEVNULL
        lifeline = None
        if shell:
            path = os.path.abspath(workflow.path)
            if not os.access(path, os.X_OK):  # what an exec of it would say, said here
                raise PermissionError(errno.EACCES, "not executable", path)
            argv = ["/bin/sh", "-c", GUARDED, path, sys.executable, GUARD, repr(lease_until)]
            lifeline = os.pipe()  # non-inheritable: only the child's stdin copies the read end
            stdin = lifeline[0]
            # Shell workflows call `ys step ...`: the ys next to this interpreter comes first.
            bindir = os.path.dirname(sys.executable)
            env = {**env, "PATH": bindir + os.pathsep + env.get("PATH", os.defpath)}
        else:
            argv = [sys.executable, "-m", "ys.worker"]
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            pass_fds = (theirs.fileno(),)
            env = {**env, "YS_CHANNEL_FD": str(theirs.fileno())}
        output = os.pipe()  # non-inheritable: only the child's dup2 copies reach it
        stdout = os.pipe() if shell else output
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=stdin,
                stdout=stdout[1],
                stderr=output[1],
                env=env,
                cwd=_cwd(workflow),
                start_new_session=True,
                pass_fds=pass_fds,
                umask=_umask(workflow),
                preexec_fn=_preexec(workflow, cgroup),
            )
        except BaseException:
            for fd in {*output, *stdout, *(lifeline or ())}:
                os.close(fd)
            if ours is not None:
                ours.close()
            raise
        finally:
            if theirs is not None:
                theirs.close()
        for fd in {output[1], stdout[1]}:
            os.close(fd)
        if lifeline is not None:
            os.close(lifeline[0])
            os.set_blocking(lifeline[1], False)  # a renewal's line never waits for the guard
        if ours is not None:
            ours.setblocking(False)
            try:
                await asyncio.get_running_loop().sock_sendall(ours, _launch_line(start))
            except OSError as exc:  # it died at once: its exit says so
                log.warning("the launch of a spawned worker was not written: %s", exc)
        return Worker(
            proc, output[0], stdout[0] if shell else None, ours, lifeline[1] if lifeline else None
        )


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


@dataclass
class Spare:
    """A child the fork server forked ahead, waiting for a delivery on `sock`."""

    pid: int
    sock: socket.socket


class WarmLauncher:
    """Python deliveries go to children the fork server (ys.worker.forkserver) forked ahead from a
    preloaded interpreter, which takes the interpreter's start, the SDK's imports and the
    fork itself out of every delivery: a launch is one write to a live process. Shell
    workflows, and any delivery while the fork server is unavailable, are spawned.

    The server is asked for a new spare whenever one is taken; a launch that finds none waits
    for the next (and asks for one more, up to `most` spares ready or coming)."""

    def __init__(self, most: int = 4) -> None:
        self.spawn = SpawnLauncher()
        self.most = max(1, most)
        self._server: asyncio.subprocess.Process | None = None
        self._link: socket.socket | None = None
        self._buf = b""
        self._fds: deque[int] = deque()  # descriptors received, each for its "spare" line
        self._ready: asyncio.Future[None] | None = None
        self._spares: deque[Spare] = deque()
        self._waiting: deque[asyncio.Future[Spare | None]] = deque()
        self._asked = 0  # spares asked for that have not come yet
        self._procs: dict[int, WarmProcess] = {}
        self._early: dict[int, int] = {}  # exits reported before the launch registered them
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Start the fork server now, so the first delivery finds a spare."""
        await self._ensure()

    async def _ensure(self) -> bool:
        async with self._lock:
            if self._server is not None and self._server.returncode is None:
                return True
            self._gone()  # what the last server left
            loop = asyncio.get_running_loop()
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                server = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "ys.worker.forkserver",
                    str(theirs.fileno()),
                    stdin=asyncio.subprocess.DEVNULL,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                )
            except Exception as exc:
                ours.close()
                log.warning("warm launcher unavailable (%s); spawning workers", exc)
                return False
            finally:
                theirs.close()
            ours.setblocking(False)
            self._link, self._server, self._buf = ours, server, b""
            self._ready = loop.create_future()
            loop.add_reader(ours.fileno(), self._on_link)
            try:
                await asyncio.wait_for(asyncio.shield(self._ready), 30)
            except (TimeoutError, ConnectionError) as exc:
                log.warning("warm launcher unavailable (%s); spawning workers", exc)
                server.kill()
                self._gone()
                return False
            self._ask(1)
            return True

    def _ask(self, n: int) -> None:
        n = min(n, self.most - len(self._spares) - self._asked)
        if n <= 0 or self._link is None:
            return
        try:
            self._link.send(b'{"spares": %d}\n' % n)  # a few bytes: the buffer has room
        except OSError:
            return
        self._asked += n

    def _on_link(self) -> None:
        link = self._link
        assert link is not None
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(link, 262144, 64)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data, fds = b"", []
            self._fds.extend(fds)
            if not data:
                self._gone()
                return
            self._buf += data
            *lines, self._buf = self._buf.split(b"\n")
            for line in lines:
                if line.strip():
                    self._message(json.loads(line))

    def _message(self, msg: ServerMessage) -> None:
        if "exit" in msg:
            pid, code = int(msg["exit"]), int(msg["code"])
            proc = self._procs.pop(pid, None)
            if proc is not None:
                proc._exited(code)
            elif not self._drop_spare(pid):
                self._early[pid] = code
        elif "spare" in msg:
            self._asked = max(0, self._asked - 1)
            if msg["spare"] is None:  # the server could not fork
                self._hand(None)
                return
            spare = Spare(msg["spare"], socket.socket(fileno=self._fds.popleft()))
            spare.sock.setblocking(False)
            self._hand(spare)
        elif "ready" in msg and self._ready is not None and not self._ready.done():
            self._ready.set_result(None)

    def _hand(self, spare: Spare | None) -> None:
        while self._waiting:
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_result(spare)
                return
        if spare is not None:
            self._spares.append(spare)

    def _drop_spare(self, pid: int) -> bool:
        """A spare died before its delivery (killed, say): forget it."""
        for spare in self._spares:
            if spare.pid == pid:
                self._spares.remove(spare)
                spare.sock.close()
                self._ask(1)
                return True
        return False

    def _gone(self) -> None:
        """The fork server is gone (or never came): its spares are let go, the workers it
        forked are watched by their pid (their exits come no more), and launches waiting
        for a spare spawn instead."""
        if self._link is not None:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self._link.fileno())
            self._link.close()
            self._link = None
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
        for spare in self._spares:
            spare.sock.close()
        self._spares.clear()
        self._asked = 0
        for proc in self._procs.values():
            asyncio.get_running_loop().create_task(_poll_exit(proc))
        self._procs.clear()
        self._early.clear()
        self._hand(None)
        while self._waiting:
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_result(None)
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(ConnectionError("the fork server exited"))
        self._server = None

    async def _take(self) -> Spare | None:
        """A spare (a new one is asked for in its place), or None if none comes."""
        if self._spares:
            spare = self._spares.popleft()
            self._ask(1)
            return spare
        fut: asyncio.Future[Spare | None] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        self._ask(len(self._waiting))
        try:
            return await asyncio.wait_for(fut, 30)
        except TimeoutError:
            return None

    async def launch(
        self,
        workflow: Workflow,
        env: dict[str, str],
        log_path: Path,
        start: Launch | None = None,
        lease_until: float = math.inf,
        cgroup: Path | None = None,
    ) -> Worker:
        if workflow.kind != "python" or start is None or not await self._ensure():
            return await self.spawn.launch(workflow, env, log_path, start, lease_until, cgroup)
        # The spare runs with the server's environment, the daemon's own: the delivery's
        # variables go with the launch.
        warm: WarmLaunch = {
            **start,
            "env": _run_env(workflow, env),
            "cwd": _cwd(workflow),
            "umask": _umask(workflow),
            **_limits(workflow, cgroup),
        }
        line = _launch_line(warm)
        while True:
            spare = await self._take()
            if spare is None:
                log.warning("no spare from the fork server; spawning this worker")
                return await self.spawn.launch(workflow, env, log_path, start, lease_until, cgroup)
            out_r, out_w = os.pipe()
            proc = WarmProcess(spare.pid)
            self._procs[spare.pid] = proc
            try:
                sent = socket.send_fds(spare.sock, [line[:LAUNCH_CHUNK]], [out_w])
            except OSError:  # it died waiting: its exit (if any) comes to nobody
                self._procs.pop(spare.pid, None)
                spare.sock.close()
                os.close(out_r)
                continue
            finally:
                os.close(out_w)
            break
        code = self._early.pop(proc.pid, None)
        if code is not None:
            self._procs.pop(proc.pid, None)
            proc._exited(code)
        if sent < len(line):  # a long run state: the rest as the worker reads it
            try:
                await asyncio.get_running_loop().sock_sendall(spare.sock, line[sent:])
            except OSError as exc:  # it died: its exit says so
                log.warning("the launch of worker %d was cut short: %s", proc.pid, exc)
        return Worker(proc, out_r, None, spare.sock)

    async def close(self) -> None:
        for spare in self._spares:  # a spare whose socket closes exits
            spare.sock.close()
        self._spares.clear()
        server = self._server
        link = self._link
        if link is not None:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(link.fileno())
            link.close()  # the server sees the link close and exits
            self._link = None
        if server is not None and server.returncode is None:
            try:
                await asyncio.wait_for(server.wait(), 5)
            except TimeoutError:
                server.kill()


async def _poll_exit(proc: WarmProcess) -> None:
    """For a worker whose parent (the fork server) is gone: wait until its pid disappears."""
    while True:
        try:
            os.kill(proc.pid, 0)
        except ProcessLookupError:
            proc._exited(-1)
            return
        await asyncio.sleep(0.2)


def make_launcher(concurrency: int = 4, kind: str = "warm") -> Launcher:
    """The warm launcher (with up to `concurrency` spares) unless `kind` is spawn (the
    `launcher` setting)."""
    if kind == "spawn":
        return SpawnLauncher()
    return WarmLauncher(concurrency)
