"""`ys daemon stop` sticks while commands follow or wait elsewhere: `wait`, `history -f`,
`logs -f` and `trigger --wait` (after admission) each end with exit 5 and one line saying the
daemon stopped, and none of them starts it again; a command typed afresh still does."""

from __future__ import annotations

import os
from pathlib import Path

from cli_support import Streaming, daemons_for, wait_until


def connected(pid: int) -> bool:
    """The process holds a connected Unix socket (it has reached the daemon). Linux /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    with open("/proc/net/unix") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return any(len(r) > 6 and r[6] in inodes and r[5] == "03" for r in rows)  # 03: connected


def test_stop_sticks_while_commands_follow_or_wait(autostart_home, tmp_path):
    h = autostart_home
    h.start()
    gate = tmp_path / "gate"
    with h.client() as c:
        c.trigger("gate", {"gate": str(gate)}, execution_id="held")
    followers = {
        "wait": Streaming(h, "wait", "held"),
        "history": Streaming(h, "history", "held", "--follow"),
        "logs": Streaming(h, "logs", "held", "--follow"),
        "trigger": Streaming(
            h, "trigger", "gate", "--id", "held-2", "-p", f"gate={gate}", "--wait"
        ),
    }
    try:
        # each has reached the daemon (so none of them is a command typed afresh)
        wait_until(lambda: followers["history"].lines, message="history -f to print")
        wait_until(lambda: "started" in followers["logs"].lines, message="logs -f to print")
        wait_until(lambda: followers["trigger"].lines == ["held-2"], message="the admission")
        wait_until(lambda: connected(followers["wait"].proc.pid), message="wait to connect")

        stop = h.ys("daemon", "stop")
        assert stop.returncode == 0, stop.stderr
        for name, f in followers.items():
            assert f.finish(timeout=60) == 5, name
            assert f.proc.stderr is not None
            last = f.proc.stderr.read().splitlines()[-1]
            assert last.startswith("DAEMON_UNAVAILABLE: ") and "stop" in last, (name, last)
        assert daemons_for(h.home) == []  # nobody started it again
    finally:
        for f in followers.values():
            f.kill()
    gate.touch()
    fresh = h.ys("get", "held", "--json")  # typed afresh: starts the daemon
    assert fresh.returncode == 0, fresh.stderr
    assert len(daemons_for(h.home)) == 1


def test_a_client_that_reached_the_daemon_never_starts_it_again(autostart_home, monkeypatch):
    # The commands' client (autostart on), between two polls of a follow: the daemon has
    # stopped for good in between, so nothing even answers "stopping".
    h = autostart_home
    for key in ("YS_HOME", "YS_WORKFLOWS"):
        monkeypatch.setenv(key, h.env[key])
    monkeypatch.delenv("YS_AUTOSTART", raising=False)
    monkeypatch.delenv("YS_SOCKET", raising=False)
    h.start()
    from ys.commands._output import client
    from ys.errors import DaemonUnavailable

    with client() as c:
        assert c.version()["pid"] == h.proc.pid
        c.close()  # as a follow's polls do, the next request makes a new connection
        assert h.ys("daemon", "stop").returncode == 0
        try:
            c.version()
            raise AssertionError("the client reached a daemon after the stop")
        except DaemonUnavailable as exc:
            assert "stopped answering" in exc.message and "ys daemon start" in exc.message
    assert daemons_for(h.home) == []
