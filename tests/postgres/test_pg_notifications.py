"""A daemon on PostgreSQL never acts on the notification of its own commit (docs/design.md,
"On PostgreSQL"): under a load of short executions on one daemon, none of its workers is killed as if
its execution had ended elsewhere, and no delivery is counted failed."""

from __future__ import annotations

import threading

from tests.e2e.test_metrics import value
from tests.pg_support import SUPERUSER, Databases
from tests.support import fixture_dir, lines, make_home, prelude, wait_until, write_script

QUICK = """
    import ys

    @ys.workflow
    def main(step, params):
        step.run("one", lambda: params["i"])
        return params["i"]
"""
LOAD = 300  # the unfixed daemon killed its own worker in ~6% of executions


def test_a_load_of_short_executions_on_one_daemon_never_kills_its_own_workers(tmp_path, pg_url):
    with make_home(tmp_path, YS_DATABASE=pg_url) as h:
        h.write("quick.py", QUICK)
        h.start(concurrency=8)
        with h.client() as c:
            ids = [c.trigger("quick", {"i": i})["execution_id"] for i in range(LOAD)]
            for execution_id in ids:
                assert c.wait(execution_id, timeout=120)["status"] == "completed"
            wait_until(  # the dispatcher ends a delivery just after its outcome is recorded
                lambda: (
                    (
                        value(
                            c.metrics(),
                            "ys_deliveries_ended_total",
                            workflow="quick",
                            result="completed",
                        )
                        or 0
                    )
                    + (
                        value(
                            c.metrics(),
                            "ys_deliveries_ended_total",
                            workflow="quick",
                            result="failed",
                        )
                        or 0
                    )
                    >= LOAD
                ),
                timeout=30,
                message="every delivery to end",
            )
            text = c.metrics()
        assert "without its worker" not in h.log()
        assert not value(text, "ys_deliveries_ended_total", workflow="quick", result="failed")
        assert (
            value(text, "ys_deliveries_ended_total", workflow="quick", result="completed") == LOAD
        )


STEPS = 20
GATED = f"""
    @ys.workflow
    def main(step, params):
        step.run("gate", block, params["dir"], "gate")
        for i in range({STEPS}):
            step.run(f"s{{i}}", time.sleep, 0.02)
        return "done"
"""


def test_a_wait_on_one_daemon_reads_the_record_once_not_at_each_step_of_another(
    tmp_path, pg_own_server
):
    """`ys wait` on daemon b while daemon a runs the execution's steps: b hears each step
    (ys_changed), but the notification says the status, so b reads the record again only
    where it ended: O(1) reads for N steps. b's statements alone are logged (its own role),
    and the reads of the record are those with its ID as their parameter."""
    import psycopg

    url = Databases(pg_own_server.url).create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE ROLE waiter SUPERUSER LOGIN")
        conn.execute("ALTER ROLE waiter SET log_statement = 'all'")
    url_b = url.replace(f"{SUPERUSER}@", "waiter@", 1)
    assert url_b != url
    fx = fixture_dir(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        make_home(tmp_path / "a", YS_DATABASE=url) as a,
        make_home(tmp_path / "b", YS_DATABASE=url_b) as b,
    ):
        for h in (a, b):
            write_script(h, "gated", GATED, prelude(start_pid=False))
        a.start()
        with a.client() as c:
            c.trigger("gated", {"dir": str(fx)}, execution_id="x")
        wait_until(lambda: "gate:start" in lines(fx), message="a's worker at the gate")
        b.start()  # x is leased by a: b never runs it

        def reads() -> int:
            return pg_own_server.log.read_text(errors="replace").count("$1 = 'x'")

        answer: list[dict] = []

        def wait() -> None:
            with b.client() as c:
                answer.append(c.wait("x", timeout=60))

        waiter = threading.Thread(target=wait)
        waiter.start()
        try:
            wait_until(lambda: reads() >= 1, message="b's first read of x")
            (fx / "gate.go").touch()
        finally:
            waiter.join(90)
        assert answer and answer[0]["status"] == "completed", answer
        assert reads() <= 3, reads()
