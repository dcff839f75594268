"""One daemon on PostgreSQL while the server restarts or goes away (docs/design.md, "On PostgreSQL"): the
daemon reconnects by itself, a delivery whose write failed is delivered again by this same
daemon once its lease has expired, and no step that finished runs again. Each test has a
server of its own (`pg_own_server`), which it restarts or stops."""

from __future__ import annotations

import json

import pytest

from tests.support import DaemonHandle, fixture_dir, lines, prelude, wait_until


@pytest.fixture
def own_home(three_step_home):
    """A home on a new database of the test's own server, its daemon started (one)."""
    return three_step_home(prelude(start_pid=False))


def assert_once_each(fx, home: DaemonHandle) -> None:
    done = lines(fx)
    assert done.count("one") == 1 and done.count("three") == 1, done
    assert done.count("two:end") == 1, done
    assert "failed in the dispatcher" not in home.log(), home.log()[-3000:]
    assert "Traceback" not in home.log(), home.log()[-3000:]


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_a_restart_of_the_server_mid_step_leaves_one_daemon_to_finish_the_execution(
    tmp_path, pg_own_server, own_home, mode
):
    fx = fixture_dir(tmp_path)
    with own_home.client() as c:
        c.trigger("three", {"dir": str(fx)}, execution_id="x")
        wait_until(lambda: "two:start" in lines(fx), timeout=30, message="step two to start")
        pg_own_server.restart(mode)
        (fx / "two.go").touch()
        record = c.wait("x", timeout=60)
    assert record["status"] == "completed", record
    assert_once_each(fx, own_home)


def test_a_delivery_whose_end_cannot_be_written_is_run_again_by_the_same_daemon(
    tmp_path, pg_own_server, own_home
):
    """The server is down when step two ends and stays down past the delivery's lease:
    nothing of the delivery is written; once the server is back, this daemon, alone, claims
    the execution again and finishes it."""
    fx = fixture_dir(tmp_path)
    with own_home.client() as c:
        c.trigger("three", {"dir": str(fx)}, execution_id="x")
        wait_until(lambda: "two:start" in lines(fx), timeout=30, message="step two to start")
        pg_own_server.stop_now()
        (fx / "two.go").touch()  # its save fails: the server is gone
        wait_until(
            lambda: (
                "its end was not written" in own_home.log()
                or "failed in the dispatcher" in own_home.log()
            ),
            timeout=30,
            message="the daemon to give up writing the delivery's end",
        )
        pg_own_server.resume()
        record = c.wait("x", timeout=60)
    assert record["status"] == "completed", record
    done = lines(fx)
    assert done.count("one") == 1 and done.count("three") == 1, done
    log = own_home.log()
    assert "failed in the dispatcher" not in log and "Traceback" not in log, log[-3000:]
    assert log.count("the database cannot be reached") == 1, log[-3000:]


def test_the_first_trigger_after_the_server_ended_every_connection_is_admitted(
    tmp_path, pg_own_server, own_home
):
    """The daemon's connections were all ended by the server while idle
    (pg_terminate_backend, as a restart or a proxy does): the next trigger finds out on its
    first statement, which never reached the server, and is run again on a new connection
    instead of failing."""
    import psycopg

    fx = fixture_dir(tmp_path)
    with own_home.client() as c:  # every connection of the daemon made and used once
        c.trigger("three", {"dir": str(fx)}, execution_id="warm")
        (fx / "two.go").touch()
        assert c.wait("warm", timeout=60)["status"] == "completed"
    with psycopg.connect(pg_own_server.url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname LIKE 'ys_test_%' AND pid <> pg_backend_pid()"
        )
    done = own_home.ys("trigger", "three", "--id", "x", "--params", json.dumps({"dir": str(fx)}))
    assert done.returncode == 0, done.stderr
    with own_home.client() as c:
        assert c.wait("x", timeout=60)["status"] == "completed"
    assert "failed in the dispatcher" not in own_home.log()
