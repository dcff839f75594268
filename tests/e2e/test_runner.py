"""RFC 003's runner table and the delivery-table rows that concern one invoker, through a real
daemon: how a delivery ends decides what is recorded."""

from __future__ import annotations

import pytest
from e2e_support import (
    count,
    events,
    fixture_dir,
    go,
    kinds,
    lines,
    parse_iso,
    wait_until,
    write_workflow,
)

pytestmark = pytest.mark.e2e

OUTCOMES = ("suspended", "completed", "failed", "cancelled")


def test_workflow_that_returns_completes_with_its_result_acknowledged_under_its_lease(
    daemon, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(
        daemon,
        "adder",
        """
        @ys.workflow
        def main(step, params):
            total = step.run("add", lambda a, b: a + b, params["a"], params["b"])
            return {"total": total, "tags": ["x", None, 1.5]}
    """,
    )
    c = daemon.client()
    c.trigger("adder", {"a": 40, "b": 2, "d": str(fx)}, execution_id="adder-1")
    record = c.wait("adder-1", timeout=20)
    assert record["status"] == "completed"
    assert record["outcome"] == {
        "status": "completed",
        "result": {"total": 42, "tags": ["x", None, 1.5]},
    }
    assert record["attempts"] == 1
    assert kinds(c, "adder-1") == ["admitted", "claimed", "step", "completed"]
    d = c.describe("adder-1")
    assert d["lease_expires_at"] is None  # the acknowledgement ended the lease
    assert d["due_at"] is None
    assert [(x["attempt"], x["outcome"]) for x in d["deliveries"]] == [(1, "completed")]
    assert d["steps"] == [dict(d["steps"][0], key="add", status="completed", value=42)]


def test_workflow_that_throws_outside_a_step_fails_with_the_error_name_and_message(
    daemon, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(
        daemon,
        "reject",
        """
        class OrderRejected(Exception):
            pass

        @ys.workflow
        def main(step, params):
            step.run("load", note, params["d"], "load")
            raise OrderRejected("order 42 is closed")
    """,
    )
    c = daemon.client()
    c.trigger("reject", {"d": str(fx)}, execution_id="reject-1")
    record = c.wait("reject-1", timeout=20)
    assert record["status"] == "failed"
    error = record["outcome"]["error"]
    assert (error["name"], error["message"]) == ("OrderRejected", "order 42 is closed")
    assert record["outcome"]["status"] == "failed"
    assert kinds(c, "reject-1") == ["admitted", "claimed", "step", "failed"]
    # a failed outcome is final: later reads return the same error, nothing runs again
    assert c.get("reject-1")["outcome"] == record["outcome"]
    assert c.wake("reject-1") == {"status": "ignored"}
    assert lines(fx) == ["load"]
    assert c.describe("reject-1")["due_at"] is None


def test_infrastructure_failure_during_a_run_is_not_an_outcome_and_is_delivered_again(
    daemon, tmp_path
):
    fx = fixture_dir(tmp_path)
    # The runtime failing under a step (its socket or store) surfaces in the worker as
    # InfrastructureFailure; here it is provoked once, on the first attempt only.
    write_workflow(
        daemon,
        "infra",
        """
        from ys.sdk import InfrastructureFailure

        def save(d):
            marker = pathlib.Path(d, "failed-once")
            if not marker.exists():
                marker.touch()
                raise InfrastructureFailure(OSError("the store is unreachable"))
            return note(d, "save")

        @ys.workflow
        def main(step, params):
            step.run("load", note, params["d"], "load")
            try:
                step.run("save", save, params["d"])
            except Exception:  # workflow code cannot swallow an infrastructure failure
                return "swallowed"
            return "saved"
    """,
    )
    c = daemon.client()
    c.trigger("infra", {"d": str(fx)}, execution_id="infra-1")
    record = c.wait("infra-1", timeout=20)
    assert record["outcome"] == {"status": "completed", "result": "saved"}
    assert record["attempts"] == 2
    evs = events(c, "infra-1")
    ks = [e["kind"] for e in evs]
    assert ks == ["admitted", "claimed", "step", "released", "claimed", "step", "completed"]
    released = evs[3]["data"]
    assert released["reason"] == "worker_failed"  # the worker replied retry (exit 75)
    assert "status 75" in released["detail"]
    assert lines(fx) == ["load", "save"]
    first = c.describe("infra-1")["deliveries"][0]
    assert first["outcome"] == "retry (worker_failed)"


def test_child_exit_before_an_outcome_releases_the_lease_and_redelivers_after_the_delay(
    daemon, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(
        daemon,
        "crash",
        """
        def maybe_crash(d):
            marker = pathlib.Path(d, "crashed-once")
            if not marker.exists():
                marker.touch()
                os._exit(3)  # the process dies before any outcome
            return note(d, "work")

        @ys.workflow
        def main(step, params):
            step.run("load", note, params["d"], "load")
            return step.run("work", maybe_crash, params["d"])
    """,
    )
    c = daemon.client()
    c.trigger("crash", {"d": str(fx)}, execution_id="crash-1")
    record = c.wait("crash-1", timeout=20)
    assert record["outcome"] == {"status": "completed", "result": "work"}
    evs = events(c, "crash-1")
    ks = [e["kind"] for e in evs]
    assert ks == ["admitted", "claimed", "step", "released", "claimed", "step", "completed"]
    # no outcome was recorded for the first delivery
    first_delivery = ks[ks.index("claimed") : ks.index("released")]
    assert not set(first_delivery) & set(OUTCOMES)
    released = evs[3]
    assert released["data"]["reason"] == "worker_failed"
    assert "status 3" in released["data"]["detail"]
    # redelivered only after the redelivery delay (YS_RETRY_BASE_SECONDS=0.2 in the fixture)
    retry_at = parse_iso(released["data"]["retry_at"])
    assert retry_at >= parse_iso(released["at"]) + 0.15
    assert parse_iso(evs[4]["at"]) >= retry_at - 0.001
    assert lines(fx) == ["load", "work"]  # the finished step did not run again


def test_sleep_records_the_step_and_its_wake_before_the_suspended_report(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    write_workflow(
        daemon,
        "napper",
        """
        @ys.workflow
        def main(step, params):
            step.run("load", note, params["d"], "load")
            step.sleep("nap", 3600)
            return "rested"
    """,
    )
    c = daemon.client()
    c.trigger("napper", {"d": str(fx)}, execution_id="napper-1")
    wait_until(lambda: c.get("napper-1")["status"] == "suspended", message="suspended")
    evs = events(c, "napper-1")
    ks = [e["kind"] for e in evs]
    assert ks == ["admitted", "claimed", "step", "step", "suspended"]
    nap = evs[3]
    assert nap["data"]["key"] == "nap" and nap["data"]["status"] == "waiting"
    wake_at = parse_iso(nap["data"]["wake_at"])
    assert wake_at >= parse_iso(nap["at"]) + 3599
    d = c.describe("napper-1")
    assert d["outcome"] is None
    waiting = {s["key"]: s for s in d["steps"]}["nap"]
    assert waiting["status"] == "waiting"
    assert abs(parse_iso(waiting["wake_at"]) - wake_at) < 0.002
    assert abs(parse_iso(d["due_at"]) - wake_at) < 0.002  # the wake is pending
    assert d["lease_expires_at"] is None
    assert [x["outcome"] for x in d["deliveries"]] == ["suspended"]


def test_direct_trigger_resolves_once_admission_commits_and_the_dispatcher_delivers(
    daemon, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(
        daemon,
        "slow",
        """
        @ys.workflow
        def main(step, params):
            return step.run("work", block, params["d"], "work")
    """,
    )
    # The workflow blocks until this test creates a file, which it does only after trigger
    # returned: a trigger that waited for the worker would never return (client timeout 10 s).
    c = daemon.client(timeout=10)
    started = c.trigger("slow", {"d": str(fx)}, execution_id="slow-1")
    assert started == {"execution_id": "slow-1", "started": True}
    assert c.get("slow-1")["status"] in ("admitted", "running")
    assert kinds(c, "slow-1")[0] == "admitted"
    wait_until(lambda: count(fx, "work:start") == 1, message="the dispatcher delivered it")
    assert c.get("slow-1")["status"] == "running"
    go(fx, "work")
    record = c.wait("slow-1", timeout=20)
    assert record["outcome"] == {"status": "completed", "result": "work"}
    assert count(fx, "work:end") == 1
