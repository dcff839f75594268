"""The warm launcher forks one child ahead of its delivery (ys/worker/forkserver.py's spare): a claim
hands the delivery to a process that is already up, the server forks the next spare, and a
spare with no delivery goes when the daemon does. (The fork server starts with the first
delivery.)"""

from __future__ import annotations

from pathlib import Path

from tests.support import alive, wait_until

PID = """
import os
import ys

@ys.workflow
def main(step, params):
    return os.getpid()
"""


def children(pid: int) -> list[int]:
    """Its live children (a worker that has just ended may not be reaped yet)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(x) for x in (task / "children").read_text().split()]
    return [p for p in out if alive(p)]


def the_spare(server: int) -> int:
    """The one child the server has once the deliveries before have ended: its spare."""

    def one() -> int | None:
        kids = children(server)
        return kids[0] if len(kids) == 1 else None

    return wait_until(one, message="one spare child waits")


def fork_server(daemon) -> int:
    def found() -> int | None:
        for pid in children(daemon.proc.pid):
            if b"ys.worker.forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        return None

    return wait_until(found, message="the fork server is up")


def run_pid(daemon) -> dict:
    with daemon.client() as c:
        wait_until(
            lambda: "pid" in {w["name"] for w in c.workflows()["workflows"]},
            message="the script is registered",
        )
        record: dict = c.wait(c.trigger("pid")["execution_id"], timeout=60)
    assert record["status"] == "completed", record
    return record


def test_a_delivery_runs_in_the_child_forked_ahead_and_the_next_one_is_forked(daemon):
    daemon.write("pid.py", PID)
    run_pid(daemon)  # starts the fork server
    server = fork_server(daemon)
    spare = the_spare(server)
    record = run_pid(daemon)
    assert record["outcome"]["result"] == spare  # the delivery went to the live spare
    wait_until(
        lambda: [p for p in children(server) if p != spare], message="the next spare is forked"
    )


def test_a_spare_with_no_delivery_ends_with_the_daemon(daemon):
    daemon.write("pid.py", PID)
    run_pid(daemon)
    server = fork_server(daemon)
    spare = the_spare(server)
    daemon.stop()
    wait_until(lambda: not alive(spare), message="the spare is gone")
    assert not alive(server)
