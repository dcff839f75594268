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
    """A home of its own (a box) in `<root>/<name>`, on the database at `url`."""
    (root / name).mkdir()
    return make_home(root / name, YS_DATABASE=url)


def test_start_passes_the_url_through_the_environment_and_status_hides_the_password(
    tmp_path, pg_url
):
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
            # no SQLite file that is not used: the `db` line names the database in use
            assert info["paths"]["db"] == url.replace("hunter2", "***")
            (db_line,) = [ln for ln in people.stdout.splitlines() if ln.split()[:1] == ["db"]]
            assert db_line.split()[1] == url.replace("hunter2", "***"), people.stdout
            assert "ys.db" not in people.stdout
        finally:
            h.ys("daemon", "stop")
            wait_until(
                lambda: (
                    not Path(f"/proc/{pid}").exists()
                    or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
                ),
                message="the daemon to exit",
            )


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
                ids.append(
                    c.trigger("three", {"dir": str(fx), "id": f"x{i}"}, execution_id=f"x{i}")[
                        "execution_id"
                    ]
                )
        with a.client() as ca, b.client() as cb:
            for execution_id in ids:
                record = ca.wait(execution_id, timeout=60)
                assert record["status"] == "completed", record
                assert cb.get(execution_id)["status"] == "completed"  # the other box sees it
        done = lines(fx)
        assert sorted(done) == sorted(
            f"x{i}:{s}" for i in range(12) for s in ("one", "two", "three")
        )
        ida = json.loads(a.ys("daemon", "status", "--json").stdout)["daemon_id"]
        idb = json.loads(b.ys("daemon", "status", "--json").stdout)["daemon_id"]
        assert ida != idb


def test_doctor_checks_the_postgresql_database_it_is_pointed_at(tmp_path, pg_url):
    url = with_password(pg_url)
    with make_home(tmp_path, YS_DATABASE=url) as h:
        h.write("hello.py", "import ys\n\n@ys.workflow\ndef main(step, params):\n    return 1\n")
        h.start()
        with h.client() as c:
            c.trigger("hello", {}, execution_id="h1")
            assert c.wait("h1", timeout=60)["status"] == "completed"
        result = h.ys("doctor", "--json")
        assert "hunter2" not in result.stdout + result.stderr
        checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
        assert result.returncode == 0, checks
        shown = url.replace("hunter2", "***")
        assert checks["database"]["detail"].startswith(f"PostgreSQL at {shown} (server ")
        assert "executions 1" in checks["schema"]["detail"]
        assert checks["histories"]["ok"] and "1 execution(s)" in checks["histories"]["detail"]
        assert checks["daemon"]["ok"], checks["daemon"]
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:  # damage a record behind ys's back
        conn.execute("UPDATE executions SET status='failed' WHERE execution_id='h1'")
    other = home_on(tmp_path, url, "other")  # found from any box, with no daemon running
    damaged = other.ys("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(damaged.stdout)["checks"]}
    assert damaged.returncode == 1
    assert checks["histories"]["level"] == "error" and "h1" in checks["histories"]["detail"]


RECORDER = """
    import json, os
    import ys

    @ys.workflow
    def main(step, params):
        def record():
            with open(os.environ["FX_HANDLED"], "a") as f:
                f.write(json.dumps(params, sort_keys=True) + "\\n")
            return True
        return step.run("record", record)
"""
BOOM = """
    import ys

    @ys.workflow(on_failure="notify")
    def main(step, params):
        step.run("one", lambda: 1)
        raise ValueError("kaput")
"""


def test_failure_handlers_versions_metrics_and_the_event_stream_across_two_daemons(
    tmp_path, pg_url
):
    """main's store rules on a shared database: a failure on one box admits its handler once
    (whichever box runs it), the record names the script version, the other box's metrics
    count it and its event stream carries every event once, in order."""
    from tests.e2e.test_metrics import value

    out = tmp_path / "handled.jsonl"
    a = home_on(tmp_path, pg_url, "a")
    b = home_on(tmp_path, pg_url, "b")
    with a, b:
        for h in (a, b):
            h.env["FX_HANDLED"] = str(out)
            h.write("notify.py", RECORDER)
            h.write("boom.py", BOOM)
            h.start()
        with a.client() as ca, b.client() as cb:
            cursor = cb.events()["cursor"]
            ca.trigger("boom", {"n": 1}, execution_id="boom-1")
            assert cb.wait("boom-1", timeout=60)["status"] == "failed"
            handler = cb.wait("boom-1.on-failure", timeout=60)
            assert handler["status"] == "completed" and handler["workflow"] == "notify"
            assert handler["params"]["error"] == {"name": "ValueError", "message": "kaput"}
            assert [json.loads(x)["execution_id"] for x in out.read_text().splitlines()] == [
                "boom-1"
            ]
            described = cb.describe("boom-1")
            assert described["script_sha256"] and not described["script_changed"]
            assert all(
                d["script_sha256"] == described["script_sha256"] for d in described["deliveries"]
            )
            text = cb.metrics()
            assert value(text, "ys_executions", workflow="boom", status="failed") == 1
            assert value(text, "ys_executions", workflow="notify", status="completed") == 1
            events: list[dict] = []
            while True:
                page = cb.events(cursor)
                if not page["events"]:
                    break
                events += page["events"]
                cursor = page["cursor"]
            mine = [(e["seq"], e["kind"]) for e in events if e["execution_id"] == "boom-1"]
            assert [s for s, _ in mine] == list(range(1, len(mine) + 1))
            assert mine[0][1] == "admitted" and mine[-1][1] == "failed"
            assert any(e["execution_id"] == "boom-1.on-failure" for e in events)
            overview = ca.overview()  # the dashboard's reads, on the shared database
            assert [r["execution_id"] for r in overview["failures"]] == ["boom-1"]
            assert overview["daemon"]["database"]["schema_version"] >= 7
