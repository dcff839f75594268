"""A daemon on PostgreSQL never acts on the notification of its own commit (docs/design.md,
"On PostgreSQL"): under a load of short executions on one daemon, none of its workers is killed as if
its execution had ended elsewhere, and no delivery is counted failed."""

from __future__ import annotations

from tests.e2e.test_metrics import value
from tests.support import make_home, wait_until

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
