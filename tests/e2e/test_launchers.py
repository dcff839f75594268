"""Both launchers deliver the same way: the warm one (fork from ys.worker.forkserver, the default)
and plain spawning (YS_LAUNCHER=spawn)."""

from __future__ import annotations

import os
import signal

import pytest

from tests.conftest import DaemonHandle, wait_until
from tests.support import GATE

SCRIPT = """
import os, ys

@ys.workflow
def main(step, params):
    print("pid", os.getpid(), "ppid", os.getppid(), flush=True)
    if step.attempt == 1 and params.get("crash"):
        os._exit(3)
    return step.run("a", lambda: params["x"] + 1)
"""


@pytest.mark.parametrize("launcher", ["warm", "spawn"])
def test_each_launcher_delivers_and_redelivers_after_a_worker_dies(
    ys_home: DaemonHandle, launcher: str
):
    ys_home.env["YS_LAUNCHER"] = launcher
    ys_home.write("calc.py", SCRIPT)
    d = ys_home.start()
    c = d.client()
    eid = c.trigger("calc", {"x": 41, "crash": True})["execution_id"]
    record = c.wait(eid, timeout=60)
    assert record["outcome"] == {"status": "completed", "result": 42}
    assert record["attempts"] == 2
    logs = d.home / "logs" / eid
    first = (logs / "1.log").read_text()
    assert "pid" in first and (logs / "2.log").exists()
    # the warm launcher's workers are children of the fork server, not of the daemon
    ppid = int(first.split("ppid")[1].split()[0])
    assert (ppid != d.proc.pid) == (launcher == "warm")
    wait_until(lambda: not d.worker_pids(), message="workers to be forgotten")


def test_the_fork_server_stops_with_the_daemon(daemon: DaemonHandle):
    daemon.write("calc.py", SCRIPT)
    c = daemon.client()
    eid = c.trigger("calc", {"x": 1})["execution_id"]
    c.wait(eid, timeout=60)
    first = (daemon.home / "logs" / eid / "1.log").read_text()
    server = int(first.split("ppid")[1].split()[0])
    os.kill(server, 0)  # running while the daemon runs
    daemon.stop()

    def gone() -> bool:
        try:
            os.kill(server, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{server}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"

    wait_until(gone, timeout=20, message="the fork server to exit")


def _fork_server(daemon: DaemonHandle) -> int:
    assert daemon.proc is not None
    pid = daemon.proc.pid
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        children = [int(p) for p in f.read().split()]
    for child in children:
        with open(f"/proc/{child}/cmdline", "rb") as f:
            if b"ys.worker.forkserver" in f.read():
                return child
    raise AssertionError(f"no fork server among the daemon's children {children}")


def test_the_fork_server_exits_quietly_when_the_daemon_is_killed(daemon: DaemonHandle, tmp_path):
    daemon.write("gate.py", GATE)
    c = daemon.client()
    eid = c.trigger("gate", {"gate": str(tmp_path / "never")})["execution_id"]
    log = daemon.home / "logs" / eid / "1.log"
    wait_until(lambda: "started" in log.read_text(), message="the worker to start")
    server = _fork_server(daemon)
    [worker] = daemon.worker_pids()
    # The server learns of its worker's end and of the daemon's death together: it has a
    # report to send to a daemon that is gone.
    os.kill(server, signal.SIGSTOP)
    try:
        daemon.kill9()
        os.killpg(worker, signal.SIGKILL)
        wait_until(lambda: _state(worker) in ("Z", None), message="the worker to die")
    finally:
        os.kill(server, signal.SIGCONT)
    wait_until(lambda: _state(server) in ("Z", None), timeout=20, message="the fork server to exit")
    assert "Traceback" not in daemon.log() and "BrokenPipeError" not in daemon.log()


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None
