"""Daemons on PostgreSQL, end to end: `ys daemon start --database URL` keeps the URL off the
daemon's command line, `ys daemon status` names the database without its password, and two
daemons (two homes, one database) share the executions: each delivered once, seen from both."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import (
    DaemonHandle,
    lines,
    make_home,
    prelude,
    wait_until,
    write_script,
)

THREE_STEPS = """
    @ys.workflow
    def main(step, params):
        for name in ("one", "two", "three"):
            step.run(name, note, params["dir"], params["id"] + ":" + name)
        return params["id"]
"""


def with_password(url: str) -> str:
    """The URL with a password (the test server trusts local connections, so any will do)."""
    return url.replace("postgresql://ys@", "postgresql://ys:hunter2@", 1)


def home_on(root: Path, url: str, name: str) -> DaemonHandle:
    (root / name).mkdir()
    h = make_home(root / name, YS_DATABASE=url)
    return h


def test_start_passes_the_url_through_the_environment_and_status_hides_the_password(
        tmp_path, pg_url):
    url = with_password(pg_url)
    with make_home(tmp_path) as h:
        started = h.ys("daemon", "start", "--json", "--database", url)
        assert started.returncode == 0, started.stderr
        pid = json.loads(started.stdout)["pid"]
        h.pids.append(pid)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
            assert "hunter2" not in cmdline and "postgresql://" not in cmdline
            status = h.ys("daemon", "status", "--json")
            info = json.loads(status.stdout)
            assert info["database"]["kind"] == "postgresql"
            assert info["database"]["location"] == url.replace("hunter2", "***")
            people = h.ys("daemon", "status")
            assert "hunter2" not in people.stdout + people.stderr
            assert "postgresql://ys:***@" in people.stdout
        finally:
            h.ys("daemon", "stop")
            wait_until(lambda: not Path(f"/proc/{pid}").exists()
                       or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2],
                       message="the daemon to exit")


def test_two_daemons_on_one_database_deliver_each_execution_once(tmp_path, pg_url):
    fx = tmp_path / "fx"
    fx.mkdir()
    a = home_on(tmp_path, pg_url, "a")
    b = home_on(tmp_path, pg_url, "b")
    with a, b:
        for h in (a, b):  # the same workflows folder deployed on each box
            write_script(h, "three", THREE_STEPS, prelude(start_pid=False))
        a.start(concurrency=4)
        b.start(concurrency=4)
        ids = []
        for i in range(12):
            h = (a, b)[i % 2]
            with h.client() as c:
                ids.append(c.trigger("three", {"dir": str(fx), "id": f"x{i}"},
                                     execution_id=f"x{i}")["execution_id"])
        with a.client() as ca, b.client() as cb:
            for execution_id in ids:
                record = ca.wait(execution_id, timeout=60)
                assert record["status"] == "completed", record
                assert cb.get(execution_id)["status"] == "completed"  # the other box sees it
        done = lines(fx)
        assert sorted(done) == sorted(f"x{i}:{s}" for i in range(12)
                                      for s in ("one", "two", "three"))
        ida = json.loads(a.ys("daemon", "status", "--json").stdout)["daemon_id"]
        idb = json.loads(b.ys("daemon", "status", "--json").stdout)["daemon_id"]
        assert ida != idb
