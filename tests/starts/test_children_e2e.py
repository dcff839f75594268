"""Children and cancellation end to end, with a real daemon and real worker processes:
step.start survives a SIGKILL in RFC 003's gap, step.call returns a child's result or raises
ChildWorkflowFailed, and `ys cancel` reaches sleepers, running workflows and attached (not
detached) children; describe and list show the parent links.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from starts_support import DaemonHandle, history, kinds, lines, wait_until, write_scripts

pytestmark = pytest.mark.e2e

SCRIPTS = {
    "ch-double": """
        @ys.workflow
        def main(step, params):
            return step.run("double", lambda n: n * 2, params["x"])
    """,
    "ch-failing": """
        class OutOfStock(Exception):
            pass

        @ys.workflow
        def main(step, params):
            step.run("check", lambda: "checked")
            raise OutOfStock("no stock for order " + str(params["order"]))
    """,
    "ch-sleeper": """
        @ys.workflow
        def main(step, params):
            step.sleep("nap", 3600)
            return "woke"
    """,
    "ch-call": """
        @ys.workflow
        def main(step, params):
            return {"result": step.call("double", "ch-double", {"x": params["x"]})}
    """,
    "ch-call-fails": """
        @ys.workflow
        def main(step, params):
            try:
                step.call("check", "ch-failing", {"order": 42})
            except ys.ChildWorkflowFailed as e:
                return {"name": e.name, "message": e.context["child_message"],
                        "child": e.child_id, "text": str(e)}
            return "not raised"
    """,
    "ch-cancel-parent": """
        @ys.workflow
        def main(step, params):
            step.start("audit", "ch-sleeper", {"who": "detached"}, detached=True)
            step.call("work", "ch-sleeper", {"who": "attached"})
            return "never"
    """,
    "ch-blocker": """
        @ys.workflow
        def main(step, params):
            d = params["d"]
            step.run("work", block, d, "work")
            try:
                step.run("after", note, d, "after")
            except ys.WorkflowCancelledError:
                step.run("cleanup", note, d, "cleanup")
                raise
            return "finished"
    """,
    "ch-family": """
        @ys.workflow
        def main(step, params):
            a = step.start("a", "ch-double", {"x": 1})
            b = step.start("b", "ch-double", {"x": 2}, detached=True)
            return [a, b]
    """,
}

CRASH_SCRIPTS = {
    "cr-child": """
        @ys.workflow
        def main(step, params):
            return step.run("ship", note, params["d"], "shipped:" + str(params["order"]))
    """,
    "cr-start": """
        @ys.workflow
        def main(step, params):
            d = params["d"]
            child = step.start("ship", "cr-child", {"order": 42, "d": d})
            step.run("after", note, d, "parent-after")
            return child
    """,
    "cr-call": """
        @ys.workflow
        def main(step, params):
            return step.call("quote", "cr-child", {"order": 7, "d": params["d"]})
    """,
}

TERMINAL = ("completed", "failed", "cancelled")


@pytest.fixture(scope="module")
def ch_daemon(shared_daemon: DaemonHandle) -> DaemonHandle:
    write_scripts(shared_daemon, SCRIPTS)
    return shared_daemon


@pytest.fixture(scope="module")
def cr_daemon(crash_daemon: DaemonHandle) -> DaemonHandle:
    write_scripts(crash_daemon, CRASH_SCRIPTS)
    return crash_daemon


def _status(c: Any, eid: str, *wanted: str) -> dict[str, Any] | None:
    rec = c.get(eid)
    return rec if rec["status"] in wanted else None


def _children(c: Any, pid: str) -> list[dict[str, Any]]:
    return c.list(parent=pid)["executions"]


# -- step.start / step.call survive a SIGKILL in the gap ---------------------------------------


def test_a_parent_killed_after_start_commits_and_before_its_step_is_recorded_has_exactly_one_child(  # noqa: E501
    cr_daemon: DaemonHandle, fx: Path
):
    c = cr_daemon.client()
    pid = c.trigger("cr-start", {"d": str(fx)})["execution_id"]
    rec = c.wait(pid, timeout=40)
    assert rec["status"] == "completed", rec
    assert (cr_daemon.home / "start.marker").exists()  # the crash point fired
    evs = history(c, pid)
    released = [e for e in evs if e["kind"] == "released"]
    assert "status -9" in released[0]["data"]["detail"]  # the first delivery was SIGKILLed
    assert [e["kind"] for e in evs].count("claimed") >= 2
    # exactly one child, linked to its parent, and it is what the step returns
    children = _children(c, pid)
    assert [ch["execution_id"] for ch in children] == [rec["outcome"]["result"]]
    assert children[0]["parent"] == {"execution_id": pid, "step_key": "ship", "detached": False}
    wait_until(
        lambda: _status(c, children[0]["execution_id"], "completed"), message="the child completed"
    )
    assert lines(fx).count("shipped:42") == 1
    assert lines(fx).count("parent-after") == 1
    steps = c.describe(pid)["steps"]
    assert [(s["key"], s["kind"], s["status"]) for s in steps] == [
        ("ship", "start", "completed"),
        ("after", "run", "completed"),
    ]
    assert steps[0]["value"]["execution_id"] == children[0]["execution_id"]


def test_a_parent_killed_after_step_call_starts_its_child_has_one_child_and_its_result(
    cr_daemon: DaemonHandle, fx: Path
):
    c = cr_daemon.client()
    pid = c.trigger("cr-call", {"d": str(fx)})["execution_id"]
    rec = c.wait(pid, timeout=40)
    assert rec["outcome"] == {"status": "completed", "result": "shipped:7"}
    assert (cr_daemon.home / "call.marker").exists()
    assert [e["kind"] for e in history(c, pid)].count("released") >= 1
    children = _children(c, pid)
    assert len(children) == 1
    assert children[0]["parent"] == {"execution_id": pid, "step_key": "quote", "detached": False}
    assert lines(fx).count("shipped:7") == 1


# -- step.call -----------------------------------------------------------------------------------


def test_step_call_returns_the_childs_result(ch_daemon: DaemonHandle):
    c = ch_daemon.client()
    pid = c.trigger("ch-call", {"x": 21})["execution_id"]
    rec = c.wait(pid, timeout=30)
    assert rec["outcome"] == {"status": "completed", "result": {"result": 42}}
    (child,) = _children(c, pid)
    assert child["workflow"] == "ch-double" and child["outcome"]["result"] == 42
    assert child["parent"] == {"execution_id": pid, "step_key": "double", "detached": False}
    steps = c.describe(pid)["steps"]
    assert [(s["key"], s["kind"], s["status"]) for s in steps] == [("double", "call", "completed")]


def test_a_failing_child_raises_child_workflow_failed_in_its_caller(ch_daemon: DaemonHandle):
    c = ch_daemon.client()
    pid = c.trigger("ch-call-fails")["execution_id"]
    rec = c.wait(pid, timeout=30)
    assert rec["status"] == "completed", rec
    result = rec["outcome"]["result"]
    (child,) = _children(c, pid)
    assert child["status"] == "failed"
    assert result["name"] == "OutOfStock"
    assert result["message"] == "no stock for order 42"
    assert result["child"] == child["execution_id"]
    assert "OutOfStock" in result["text"] and "no stock for order 42" in result["text"]
    assert child["outcome"]["error"]["name"] == "OutOfStock"


# -- cancellation --------------------------------------------------------------------------------


def test_a_cancelled_parent_cancels_its_attached_child_and_leaves_its_detached_child_running(
    ch_daemon: DaemonHandle,
):
    c = ch_daemon.client()
    pid = c.trigger("ch-cancel-parent")["execution_id"]

    def settled() -> dict[str, dict[str, Any]] | None:
        kids = {k["parent"]["step_key"]: k for k in _children(c, pid)}
        if (
            c.get(pid)["status"] == "suspended"
            and set(kids) == {"audit", "work"}
            and all(k["status"] == "suspended" for k in kids.values())
        ):
            return kids
        return None

    kids = wait_until(settled, timeout=30, message="the parent waits in step.call")
    attached, detached = kids["work"]["execution_id"], kids["audit"]["execution_id"]
    assert kids["audit"]["parent"]["detached"] is True

    answer = c.cancel(pid)
    assert answer["changed"] is True and answer["cancel_requested"] is True
    assert c.wait(pid, timeout=20)["outcome"] == {"status": "cancelled"}
    assert c.wait(attached, timeout=20)["outcome"] == {"status": "cancelled"}
    child = c.get(detached)
    assert child["status"] == "suspended" and child["cancel_requested"] is False
    assert "cancel_requested" not in kinds(c, detached)
    c.cancel(detached)  # tidy up the sleeper
    assert c.wait(detached, timeout=20)["status"] == "cancelled"


def test_cancel_reaches_a_suspended_sleeper_promptly(ch_daemon: DaemonHandle):
    c = ch_daemon.client()
    eid = c.trigger("ch-sleeper")["execution_id"]
    wait_until(lambda: _status(c, eid, "suspended"), message="the sleeper suspended")
    started = time.monotonic()
    answer = c.cancel(eid)
    assert answer["changed"] is True
    rec = c.wait(eid, timeout=10)
    assert time.monotonic() - started < 5  # not after its 3600 s timer
    assert rec["status"] == "cancelled" and rec["outcome"] == {"status": "cancelled"}
    assert kinds(c, eid)[-3:] == ["cancel_requested", "claimed", "cancelled"]


def test_a_running_workflow_sees_workflow_cancelled_error_at_its_next_step_and_can_clean_up(
    ch_daemon: DaemonHandle, fx: Path
):
    c = ch_daemon.client()
    eid = c.trigger("ch-blocker", {"d": str(fx)})["execution_id"]
    wait_until(lambda: "work:start" in lines(fx), message="the workflow blocked in its step")
    answer = c.cancel(eid)
    assert answer["changed"] is True and answer["status"] == "running"
    (fx / "work.go").touch()  # the blocked step now finishes
    rec = c.wait(eid, timeout=20)
    assert rec["outcome"] == {"status": "cancelled"}
    assert lines(fx) == ["work:start", "work:end", "cleanup"]  # "after" never ran
    steps = c.describe(eid)["steps"]
    assert [(s["key"], s["status"]) for s in steps] == [
        ("work", "completed"),
        ("cleanup", "completed"),
    ]


def test_cancelling_a_terminal_execution_changes_nothing(ch_daemon: DaemonHandle):
    c = ch_daemon.client()
    eid = c.trigger("ch-double", {"x": 5})["execution_id"]
    rec = c.wait(eid, timeout=20)
    assert rec["status"] == "completed"
    before = history(c, eid)
    answer = c.cancel(eid)
    assert answer["changed"] is False
    assert answer["status"] == "completed" and answer["outcome"] == rec["outcome"]
    assert answer["cancel_requested"] is False
    assert history(c, eid) == before
    after = c.wait(eid, timeout=1)
    assert after["history_length"] == rec["history_length"] == len(before)
    assert (after["status"], after["outcome"], after["updated_at"]) == (
        rec["status"],
        rec["outcome"],
        rec["updated_at"],
    )


# -- describe and list show the parent links -----------------------------------------------------


def test_describe_lists_children_and_list_filters_by_parent(ch_daemon: DaemonHandle):
    c = ch_daemon.client()
    pid = c.trigger("ch-family")["execution_id"]
    other = c.trigger("ch-family")["execution_id"]
    rec = c.wait(pid, timeout=30)
    a, b = rec["outcome"]["result"]
    c.wait(other, timeout=30)
    for kid in (a, b):
        c.wait(kid, timeout=20)

    children = c.describe(pid)["children"]
    assert sorted(children, key=lambda k: k["step_key"]) == [
        {
            "execution_id": a,
            "workflow": "ch-double",
            "status": "completed",
            "step_key": "a",
            "detached": False,
        },
        {
            "execution_id": b,
            "workflow": "ch-double",
            "status": "completed",
            "step_key": "b",
            "detached": True,
        },
    ]
    assert c.get(a)["parent"] == {"execution_id": pid, "step_key": "a", "detached": False}
    assert c.get(b)["parent"] == {"execution_id": pid, "step_key": "b", "detached": True}
    assert c.get(pid)["parent"] is None
    listed = {r["execution_id"] for r in c.list(parent=pid)["executions"]}
    assert listed == {a, b}
    others = {r["execution_id"] for r in c.list(parent=other)["executions"]}
    assert len(others) == 2 and not others & listed


# -- the start route over the socket ---------------------------------------------------------------


def test_the_start_route_is_idempotent_unfenced_and_refuses_with_start_error_codes(
    ch_daemon: DaemonHandle,
):
    from urllib.parse import quote

    from ys.client import Transport
    from ys.errors import WorkflowStartError

    c = ch_daemon.client()
    caller = c.trigger("ch-sleeper")["execution_id"]
    wait_until(lambda: _status(c, caller, "suspended"), message="the caller suspended")
    path = f"/v1/executions/{quote(caller, safe='')}/starts/ship"
    body = {"workflow": "ch-double", "params": {"x": 3, "y": [1, 2]}, "detached": False}
    no_token = Transport(str(ch_daemon.socket))
    stale = Transport(str(ch_daemon.socket), token="a-stale-delivery-token")
    first = no_token.request("POST", path, body)["execution_id"]
    assert stale.request("POST", path, body)["execution_id"] == first
    reordered = dict(body, params={"y": [1, 2], "x": 3})
    assert no_token.request("POST", path, reordered)["execution_id"] == first
    with pytest.raises(WorkflowStartError) as exc:
        stale.request("POST", path, dict(body, workflow="ch-sleeper"))
    assert exc.value.code == "START_REQUEST_MISMATCH"
    with pytest.raises(WorkflowStartError) as exc:
        no_token.request(
            "POST",
            f"/v1/executions/{quote(caller, safe='')}/starts/bad",
            dict(body, params=["not", "an", "object"]),
        )
    assert exc.value.code == "INVALID_START_PARAMETERS"
    assert [k["execution_id"] for k in _children(c, caller)] == [first]
    assert c.wait(first, timeout=20)["outcome"] == {"status": "completed", "result": 6}
    c.cancel(caller)
    assert c.wait(caller, timeout=20)["status"] == "cancelled"
