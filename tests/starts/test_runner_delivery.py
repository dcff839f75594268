"""RFC 003, runner table (how a delivery ends decides what is recorded) and delivery table
(the dispatcher, both invokers). In-process cases use ys.testing.WorkflowTest (a movable
clock, no processes); the worker-only cases (a worker process exits, the worker's start call
fails, the dispatcher delivers a direct trigger) and the invoker comparison use a real daemon.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from starts_support import DaemonHandle, history, kinds, lines, wait_until, write_scripts

import ys
from ys.errors import LeaseLost
from ys.testing import WorkflowTest
from ys.values import Outcome

T = 1_700_000_000.0

SCRIPTS = {
    "rd-child": """
        @ys.workflow
        def main(step, params):
            return step.run("double", lambda n: n * 2, params["n"])
    """,
    "rd-failing": """
        class OutOfStock(Exception):
            pass

        @ys.workflow
        def main(step, params):
            step.run("check", lambda: "checked")
            raise OutOfStock(params["why"])
    """,
    "rd-parent": """
        @ys.workflow
        def main(step, params):
            audit = step.start("audit", "rd-child", {"n": 0}, detached=True)
            doubled = step.call("double", "rd-child", {"n": 21})
            try:
                step.call("fail", "rd-failing", {"why": "no stock for order 42"})
                failed = None
            except ys.ChildWorkflowFailed as exc:
                failed = {"name": exc.name, "message": exc.context.get("child_message")}
            return {"doubled": doubled, "failed": failed, "audit": isinstance(audit, str)}
    """,
    "rd-exits": """
        @ys.workflow
        def main(step, params):
            d = params["d"]
            step.run("before", note, d, "before")
            marker = os.path.join(d, "exited")
            if not os.path.exists(marker):
                open(marker, "w").close()
                sys.stdout.flush()
                os._exit(3)  # the worker dies before it reports an outcome
            return step.run("after", note, d, "after")
    """,
    "rd-start-fails": """
        @ys.workflow
        def main(step, params):
            d = params["d"]
            backend = type(step._backend)  # the worker's ApiBackend (in __main__)
            real = backend.start

            def flaky(self, *args):
                # The worker's start client fails once (its socket drops mid-call).
                marker = os.path.join(d, "start-failed")
                if not os.path.exists(marker):
                    open(marker, "w").close()
                    raise ConnectionResetError("the socket dropped during the start call")
                return real(self, *args)

            backend.start = flaky
            try:
                child = step.start("ship", "rd-child", {"n": 1})
            except Exception as exc:
                note(d, "caught " + type(exc).__name__)
                raise
            note(d, "started")
            return child
    """,
    "rd-blocks": """
        @ys.workflow
        def main(step, params):
            return step.run("work", block, params["d"], "work")
    """,
}


@pytest.fixture(scope="module")
def rd_daemon(shared_daemon: DaemonHandle) -> DaemonHandle:
    write_scripts(shared_daemon, SCRIPTS)
    return shared_daemon


def _iso(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


def _events(t: WorkflowTest, execution_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.data.to_json()) for e in t.store.events(execution_id)]


# -- runner table --------------------------------------------------------------------------------


def test_workflow_returns_deliver_resolves_completed_with_the_result():
    def adder(step: ys.Step, params: dict[str, Any]) -> Any:
        total = step.run("add", lambda: params["a"] + params["b"])
        return {"total": total, "tags": ["x", None, 1.5]}

    with WorkflowTest({"adder": adder}, start=T) as t:
        eid = t.trigger("adder", {"a": 40, "b": 2})
        assert t.run() == 1
        assert t.get(eid)["outcome"] == {
            "status": "completed",
            "result": {"total": 42, "tags": ["x", None, 1.5]},
        }
        assert [k for k, _ in _events(t, eid)] == ["admitted", "claimed", "step", "completed"]


def test_workflow_throws_outside_a_step_deliver_resolves_failed_with_the_error():
    class OrderRejected(Exception):
        pass

    def reject(step: ys.Step, params: Any) -> Any:
        step.run("load", lambda: "loaded")
        raise OrderRejected("order 42 is closed")

    with WorkflowTest({"reject": reject}, start=T) as t:
        eid = t.trigger("reject")
        t.run()
        rec = t.get(eid)
        assert rec["status"] == "failed"
        error = rec["outcome"]["error"]
        assert (error["name"], error["message"]) == ("OrderRejected", "order 42 is closed")
        assert [k for k, _ in _events(t, eid)] == ["admitted", "claimed", "step", "failed"]
        assert t.run() == 0  # a failed outcome is final


def test_an_infrastructure_failure_during_a_run_records_no_outcome_and_is_delivered_again(
    monkeypatch: pytest.MonkeyPatch,
):
    seen: list[str] = []

    def swallow(step: ys.Step, params: Any) -> Any:
        try:
            return step.run("work", lambda: "done")
        except Exception as exc:  # noqa: BLE001 - must not see the runtime's failure
            seen.append(type(exc).__name__)
            return "swallowed"

    with WorkflowTest({"swallow": swallow}, start=T) as t:
        real = t.store.save_step
        failures = [OSError("disk I/O error")]

        def flaky(*args: Any, **kw: Any) -> Any:
            if failures:
                raise failures.pop()
            return real(*args, **kw)

        monkeypatch.setattr(t.store, "save_step", flaky)
        eid = t.trigger("swallow")
        assert t.run() == 2  # delivered again after the failed delivery
        assert seen == []
        assert t.get(eid)["outcome"] == {"status": "completed", "result": "done"}
        evs = _events(t, eid)
        assert [k for k, _ in evs] == [
            "admitted",
            "claimed",
            "released",
            "claimed",
            "step",
            "completed",
        ]
        assert evs[2][1]["reason"] == "worker_failed" and "disk I/O error" in evs[2][1]["detail"]


def test_a_delay_suspends_after_the_unfinished_step_and_its_wake_are_recorded(
    monkeypatch: pytest.MonkeyPatch,
):
    def nap(step: ys.Step, params: Any) -> Any:
        step.sleep("cooldown", 600)
        return "woke"

    with WorkflowTest({"nap": nap}, start=T) as t:
        real = t.store.acknowledge
        at_ack: list[Any] = []

        def watching(execution_id: str, token: str, outcome: Outcome, **kw: Any) -> Any:
            # what is durable at the moment deliver resolves with its outcome
            at_ack.append((outcome, t.store.steps(execution_id), t.store.get(execution_id)))
            return real(execution_id, token, outcome, **kw)

        monkeypatch.setattr(t.store, "acknowledge", watching)
        eid = t.trigger("nap")
        t.run()
        outcome, steps, record = at_ack[0]
        assert outcome == Outcome("suspended")
        assert [(s.key, s.kind, s.status, s.wake_at) for s in steps] == [
            ("cooldown", "sleep", "waiting", T + 600)
        ]
        assert record.due_at == T + 600  # the wake is pending before the outcome
        evs = _events(t, eid)
        assert [k for k, _ in evs] == ["admitted", "claimed", "step", "suspended"]
        assert evs[2][1] == {
            "key": "cooldown",
            "kind": "sleep",
            "status": "waiting",
            "wake_at": T + 600,
        }
        assert t.get(eid)["status"] == "suspended"
        t.advance(600)
        t.run()
        assert t.get(eid)["outcome"] == {"status": "completed", "result": "woke"}


# -- delivery table -----------------------------------------------------------------------------


def test_deliver_resolves_and_the_outcome_is_acknowledged_under_its_lease(
    monkeypatch: pytest.MonkeyPatch,
):
    def wf(step: ys.Step, params: Any) -> Any:
        return step.run("a", lambda: 1)

    with WorkflowTest({"wf": wf}, start=T) as t:
        claims: list[Any] = []
        acks: list[str] = []
        real_claim, real_ack = t.store.claim_due, t.store.acknowledge

        def claim(*a: Any, **kw: Any) -> Any:
            out = real_claim(*a, **kw)
            claims.extend(out)
            return out

        def ack(execution_id: str, token: str, outcome: Any, **kw: Any) -> Any:
            acks.append(token)
            return real_ack(execution_id, token, outcome, **kw)

        monkeypatch.setattr(t.store, "claim_due", claim)
        monkeypatch.setattr(t.store, "acknowledge", ack)
        eid = t.trigger("wf")
        t.run()
        assert acks == [claims[0].token]  # acknowledged with the delivery's own lease
        assert t.store.held_leases() == []  # which the acknowledgement ended
        assert t.get(eid)["status"] == "completed"

        # an outcome offered without the lease (expired, or another delivery's) is refused
        other = t.trigger("wf")
        (d,) = real_claim(limit=1)
        with pytest.raises(LeaseLost):
            real_ack(other, "not-the-token", Outcome("completed", 1))
        t.advance(31)  # the lease (30 s) expires
        with pytest.raises(LeaseLost):
            real_ack(other, d.token, Outcome("completed", 1))
        assert t.get(other)["outcome"] is None
        t.run()  # delivered again, and this delivery's acknowledgement counts
        assert t.get(other)["outcome"] == {"status": "completed", "result": 1}


def test_deliver_resolves_under_a_real_dispatcher_ending_its_lease(rd_daemon: DaemonHandle):
    c = rd_daemon.client()
    eid = c.trigger("rd-child", {"n": 4})["execution_id"]
    assert c.wait(eid, timeout=20)["outcome"] == {"status": "completed", "result": 8}
    d = c.describe(eid)
    assert d["lease_expires_at"] is None
    assert [x["outcome"] for x in d["deliveries"]] == ["completed"]


def test_the_worker_exits_before_an_outcome_the_lease_is_released_and_it_is_delivered_again_after_the_redelivery_delay(  # noqa: E501
    rd_daemon: DaemonHandle, fx: Path
):
    c = rd_daemon.client()
    eid = c.trigger("rd-exits", {"d": str(fx)})["execution_id"]
    rec = c.wait(eid, timeout=30)
    assert rec["outcome"] == {"status": "completed", "result": "after"}
    evs = history(c, eid)
    assert [e["kind"] for e in evs] == [
        "admitted",
        "claimed",
        "step",
        "released",
        "claimed",
        "step",
        "completed",
    ]
    released = evs[3]
    assert released["data"]["reason"] == "worker_failed"
    assert "status 3" in released["data"]["detail"]
    # delivered again only after the redelivery delay (retry base 0.2 s for attempt 1), which
    # runs from the worker's exit (after the first claim)
    retry_at = _iso(released["data"]["retry_at"])  # ISO in the API, like every time
    assert retry_at >= _iso(evs[1]["at"]) + 0.2 - 0.001  # ISO ms truncation
    assert _iso(evs[4]["at"]) >= retry_at - 0.001
    assert lines(fx) == ["before", "after"]  # the recorded step did not run again


def test_the_start_client_throws_no_step_is_recorded_the_workflow_cannot_catch_it_and_it_is_delivered_again(  # noqa: E501
    rd_daemon: DaemonHandle, fx: Path
):
    c = rd_daemon.client()
    eid = c.trigger("rd-start-fails", {"d": str(fx)})["execution_id"]
    rec = c.wait(eid, timeout=30)
    assert rec["status"] == "completed", rec
    child = rec["outcome"]["result"]
    assert lines(fx) == ["started"]  # no "caught ...": workflow code never saw the failure
    evs = history(c, eid)
    assert [e["kind"] for e in evs] == [
        "admitted",
        "claimed",
        "released",
        "claimed",
        "step",
        "completed",
    ]
    assert evs[2]["data"]["reason"] == "worker_failed"  # the worker replied retry (exit 75)
    assert [x["execution_id"] for x in c.list(parent=eid)["executions"]] == [child]


def test_the_start_client_throws_in_the_test_invoker_no_step_and_delivered_again(
    monkeypatch: pytest.MonkeyPatch,
):
    seen: list[str] = []

    def parent(step: ys.Step, params: Any) -> Any:
        try:
            child = step.start("ship", "child", {"n": 1})
        except Exception as exc:  # noqa: BLE001 - must not see the client's failure
            seen.append(type(exc).__name__)
            raise
        return child

    def child(step: ys.Step, params: Any) -> Any:
        return params["n"]

    with WorkflowTest({"parent": parent, "child": child}, start=T) as t:
        real = t.store.start
        failures = [ConnectionResetError("the socket dropped")]
        steps_at_failure: list[Any] = []

        def flaky(caller: str, *a: Any, **kw: Any) -> Any:
            if failures:
                steps_at_failure.append(t.store.steps(caller))
                raise failures.pop()
            return real(caller, *a, **kw)

        monkeypatch.setattr(t.store, "start", flaky)
        eid = t.trigger("parent")
        rec = t.run_until_terminal(eid)
        assert seen == []
        assert rec["status"] == "completed"
        assert [k for k, _ in _events(t, eid)][:4] == ["admitted", "claimed", "released", "claimed"]
        assert [s.key for s in t.store.steps(eid)] == ["ship"]
        assert steps_at_failure == [[]]
        assert [r.execution_id for r in t.store.list(parent=eid).items] == [
            rec["outcome"]["result"]
        ]


def test_a_direct_trigger_resolves_once_admission_commits_and_the_dispatcher_delivers_it(
    rd_daemon: DaemonHandle, fx: Path
):
    c = rd_daemon.client()
    answer = c.trigger("rd-blocks", {"d": str(fx)}, execution_id="direct-1")
    assert answer == {"execution_id": "direct-1", "started": True}
    # committed when it resolved: another connection (another process) reads it
    conn = sqlite3.connect(rd_daemon.db)
    try:
        row = conn.execute("SELECT workflow FROM executions WHERE execution_id='direct-1'")
        assert row.fetchone() == ("rd-blocks",)
    finally:
        conn.close()
    # the trigger did not run it: the dispatcher claims and delivers it
    wait_until(lambda: "work:start" in lines(fx), message="the dispatcher delivered it")
    assert kinds(c, "direct-1")[:2] == ["admitted", "claimed"]
    (fx / "work.go").touch()
    assert c.wait("direct-1", timeout=20)["outcome"] == {"status": "completed", "result": "work"}


def test_a_direct_trigger_in_the_test_invoker_admits_and_run_delivers():
    ran: list[str] = []

    def wf(step: ys.Step, params: Any) -> Any:
        ran.append("ran")
        return "ok"

    with WorkflowTest({"wf": wf}, start=T) as t:
        eid = t.trigger("wf")
        assert ran == [] and t.deliveries == 0
        rec = t.get(eid)
        assert rec["status"] == "admitted" and rec["due_at"] is not None
        assert t.run() == 1 and ran == ["ran"]


def test_worker_and_test_invokers_give_the_same_results_for_a_parent_that_starts_and_calls_children(  # noqa: E501
    rd_daemon: DaemonHandle,
):
    c = rd_daemon.client()
    pid = c.trigger("rd-parent")["execution_id"]
    real = c.wait(pid, timeout=60)
    assert real["outcome"] == {
        "status": "completed",
        "result": {
            "doubled": 42,
            "audit": True,
            "failed": {"name": "OutOfStock", "message": "no stock for order 42"},
        },
    }

    def children_done() -> list[dict[str, Any]] | None:
        kids = c.list(parent=pid)["executions"]
        return kids if all(k["status"] in ("completed", "failed") for k in kids) else None

    real_children = wait_until(children_done, message="every child ended")
    real_steps = [(s["key"], s["kind"], s["status"]) for s in c.describe(pid)["steps"]]

    with WorkflowTest(rd_daemon.workflows) as t:
        tid = t.trigger("rd-parent")
        fake = t.run_until_terminal(tid)
        t.run()
        fake_children = [t.get(r.execution_id) for r in t.store.list(parent=tid).items]
        fake_steps = [(s.key, s.kind, s.status) for s in t.store.steps(tid)]

    assert fake["outcome"] == real["outcome"]
    assert (
        fake_steps
        == real_steps
        == [
            ("audit", "start", "completed"),
            ("double", "call", "completed"),
            ("fail", "call", "failed"),
        ]
    )

    def shape(kids: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted(
            (
                k["workflow"],
                k["parent"]["step_key"],
                k["parent"]["detached"],
                k["status"],
                str(k["outcome"]),
            )
            for k in kids
        )

    assert shape(fake_children) == shape(real_children)
    assert len(real_children) == 3
