"""While the PostgreSQL server is away (docs/design.md, "On PostgreSQL"): reads answer DATABASE_UNAVAILABLE
(exit 5) within a second, `ys daemon status`, `ys doctor` and `ys_database_up` say the database
is unreachable, a worker whose lease cannot be renewed is stopped on its box, and the log says
so once going down and once coming back. Then everything recovers by itself."""

from __future__ import annotations

import json
import time

import pytest

from tests.support import alive, fixture_dir, lines, prelude, wait_until
from ys.errors import DatabaseUnavailable
from ys.store.postgres.reach import Reach


@pytest.fixture
def home(three_step_home):
    return three_step_home(prelude(start_pid=True))


def _status(home) -> dict:
    run = home.ys("daemon", "status", "--json", timeout=10)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def _database_up(home) -> float:
    run = home.ys("metrics", timeout=10)
    assert run.returncode == 0, run.stderr
    found = [ln for ln in run.stdout.splitlines() if ln.startswith("ys_database_up ")]
    assert len(found) == 1, run.stdout[-2000:]
    return float(found[0].split()[1])


def test_while_the_server_is_away_the_daemon_says_so_and_stops_what_it_cannot_hold(
    tmp_path, pg_own_server, home
):
    fx = fixture_dir(tmp_path)
    with home.client() as c:
        c.trigger("three", {"dir": str(fx)}, execution_id="x")
    started = wait_until(
        lambda: [ln for ln in lines(fx) if ln.startswith("two:start:")],
        timeout=30,
        message="step two to start",
    )
    worker = int(started[0].rsplit(":", 1)[1])
    assert _status(home)["database"]["reachable"] is True
    assert _database_up(home) == 1.0

    pg_own_server.stop_now()
    wait_until(
        lambda: _status(home)["database"]["reachable"] is False,
        timeout=10,
        message="the daemon to find its database gone",
    )
    # reads answer at once (timed from a client already running), with the database's own
    # code: exit 5 on the command line
    c = home.client(timeout=30)
    for read in (lambda: c.get("x"), lambda: c.list(), lambda: c.describe("x")):
        t0 = time.monotonic()
        with pytest.raises(DatabaseUnavailable) as caught:
            read()
        assert time.monotonic() - t0 < 1.5, time.monotonic() - t0
        assert caught.value.code == "DATABASE_UNAVAILABLE"
    for argv in (("get", "x"), ("list",), ("describe", "x")):
        run = home.ys(*argv, timeout=30)
        assert run.returncode == 5, (argv, run.returncode, run.stderr)
        assert run.stderr.startswith("DATABASE_UNAVAILABLE"), run.stderr
        assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    shown = home.ys("daemon", "status", timeout=10)
    assert shown.returncode == 0 and "unreachable" in shown.stdout, shown.stdout
    assert _database_up(home) == 0.0
    doctor = home.ys("doctor", "--json", timeout=30)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 1
    assert not checks["daemon"]["ok"] and "unreachable" in checks["daemon"]["detail"], checks
    assert not checks["database"]["ok"] and "unreachable" in checks["database"]["detail"], checks
    # The worker's lease cannot be renewed: it is stopped on this box at its lease's end
    # (3 s here), while the server is still away.
    wait_until(lambda: not alive(worker), timeout=10, message="the worker to be stopped")
    assert _status(home)["database"]["reachable"] is False

    pg_own_server.resume()
    # Back as soon as any of the daemon's connections succeeds (the listener tries every
    # second), not only at the writer's next claim (ys/store/postgres/reach.py)
    wait_until(
        lambda: _status(home)["database"]["reachable"] is True,
        timeout=3,
        message="the daemon to find its database back",
    )
    assert _database_up(home) == 1.0
    (fx / "two.go").touch()
    with home.client() as c:
        record = c.wait("x", timeout=60)
    assert record["status"] == "completed", record
    done = lines(fx)
    assert done.count("one") == 1 and done.count("three") == 1, done
    log = home.log()
    assert log.count("the database cannot be reached") == 1, log[-4000:]
    assert log.count("the database answers again") == 1, log[-4000:]
    assert "Traceback" not in log and "failed in the dispatcher" not in log, log[-4000:]


def _recorded(url: str, workflow: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return list(
            conn.execute("SELECT sha256, timeout FROM scripts WHERE workflow = %s", (workflow,))
        )


def test_a_script_changed_while_the_server_is_away_is_recorded_once_it_is_back(pg_own_server, home):
    """The registry's re-read of a changed script records its version and options in the
    database: while the server is away that is said once (no traceback, the script not marked
    broken), and done by a later rescan once the server answers."""
    url = home.env["YS_DATABASE"]
    pg_own_server.stop_now()
    wait_until(
        lambda: _status(home)["database"]["reachable"] is False,
        timeout=10,
        message="the daemon to find its database gone",
    )
    home.write(
        "later.py", "import ys\n\n@ys.workflow(timeout=77)\ndef main(step, params):\n    return 1\n"
    )
    wait_until(
        lambda: (
            "recording a workflow change failed" in home.log() or "was not recorded" in home.log()
        ),
        timeout=30,
        message="the registry to try to record the new script",
    )
    pg_own_server.resume()
    wait_until(
        lambda: [t for _, t in _recorded(url, "later")] == [77.0],
        timeout=20,
        message="the new script's version to be recorded once the database is back",
    )
    run = home.ys("workflows", "--json", timeout=30)
    listed = {w["name"]: w for w in json.loads(run.stdout)["workflows"]}
    assert listed["later"]["error"] is None and listed["later"]["timeout"] == 77, listed
    [(sha, _)] = _recorded(url, "later")
    assert sha == listed["later"]["sha256"]
    with home.client() as c:
        eid = c.trigger("later")["execution_id"]
        assert c.wait(eid, timeout=60)["status"] == "completed"
    log = home.log()
    assert "Traceback" not in log and "was not recorded" not in log, log[-4000:]
    assert "re-reading" not in log and "re-checking" not in log, log[-4000:]


def test_the_server_is_up_again_once_any_connection_succeeds():
    """The writer cut off at its last try (it tries again only at its next batch) does not
    keep the state down once the listener, or a read, connected."""
    reach = Reach()
    reach.lost("writer", "connection refused")
    reach.lost("listener", "connection refused")
    assert not reach.up
    reach.back("listener")
    assert reach.up
    reach.lost("writer", "connection refused")
    reach.back("read")
    assert reach.up
