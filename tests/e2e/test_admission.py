"""RFC 001's three problems, through a real daemon: a repeated trigger, two wakes while
suspended, and a reused execution ID."""

from __future__ import annotations

import time

import pytest
from e2e_support import claimed, events, fixture_dir, go, kinds, lines, wait_until, write_workflow

import ys
from tests.support import Threads, parse_iso
from ys.client import Transport

pytestmark = pytest.mark.e2e

ORDER = """
@ys.workflow
def main(step, params):
    charged = step.run("charge", note, params["d"], "charge " + str(params["order"]))
    step.sleep("cooldown", params.get("sleep", 0))
    return {"charged": charged}
"""


def test_repeated_trigger_of_an_id_in_use_is_refused_and_queues_nothing(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "order", ORDER)
    c = daemon.client()
    params = {"d": str(fx), "order": 42, "sleep": 3600}
    assert c.trigger("order", params, execution_id="order-42") == {
        "execution_id": "order-42",
        "started": True,
    }
    wait_until(lambda: c.get("order-42")["status"] == "suspended", message="order-42 suspended")
    before = c.describe("order-42")

    with pytest.raises(ys.ExecutionAdmissionError) as refused:
        c.trigger("order", params, execution_id="order-42")
    assert refused.value.code == "EXECUTION_ID_CONFLICT"
    assert refused.value.context.get("status") == 409  # the HTTP route's answer

    # the same refusal on the raw route: 409 and the spec's code
    with pytest.raises(ys.ExecutionAdmissionError) as raw:
        Transport(str(daemon.socket)).request(
            "POST",
            "/v1/executions",
            {"workflow": "order", "execution_id": "order-42", "params": params},
        )
    assert (raw.value.code, raw.value.context.get("status")) == ("EXECUTION_ID_CONFLICT", 409)

    after = c.describe("order-42")
    assert after["history_length"] == before["history_length"]
    assert after["due_at"] == before["due_at"]  # nothing was made due
    assert after["status"] == "suspended"
    assert len(after["deliveries"]) == 1
    assert lines(fx) == ["charge 42"]
    assert [r["execution_id"] for r in c.ps()["executions"]] == ["order-42"]


def test_two_wakes_while_suspended_give_one_delivery(ys_home, tmp_path):
    # One slot, held by a blocked execution: both wakes land before the dispatcher can claim.
    daemon = ys_home.start(concurrency=1)
    fx = fixture_dir(tmp_path)
    write_workflow(
        daemon,
        "sleeper",
        """
        @ys.workflow
        def main(step, params):
            note(params["d"], "delivery " + str(step.attempt))  # counts deliveries, on purpose
            step.run("before", note, params["d"], "before")
            step.sleep("nap", 3600)
            step.run("after", note, params["d"], "after")
    """,
    )
    write_workflow(
        daemon,
        "blocker",
        """
        @ys.workflow
        def main(step, params):
            return step.run("hold", block, params["d"], "hold")
    """,
    )
    c = daemon.client()
    c.trigger("sleeper", {"d": str(fx)}, execution_id="sleeper")
    wait_until(lambda: c.get("sleeper")["status"] == "suspended", message="sleeper suspended")
    c.trigger("blocker", {"d": str(fx)}, execution_id="blocker")
    wait_until(
        lambda: any(ln.startswith("hold:start") for ln in lines(fx)),
        message="blocker holding the only slot",
    )

    assert c.wake("sleeper") == {"status": "requested"}
    assert c.wake("sleeper") == {"status": "requested"}
    assert c.get("sleeper")["status"] == "suspended"  # due, waiting for the slot
    go(fx, "hold")

    assert c.wait("blocker", timeout=20)["status"] == "completed"
    wait_until(
        lambda: claimed(c, "sleeper") == 2 and kinds(c, "sleeper")[-1] == "suspended",
        message="the woken delivery suspended again",
    )
    record = c.get("sleeper")
    assert record["status"] == "suspended"
    # no third delivery is queued: the only pending wake is the sleep's, an hour away
    wake_at = [e for e in events(c, "sleeper") if e["kind"] == "step"][-1]["data"]["wake_at"]
    assert parse_iso(wake_at) > time.time() + 3000
    assert record["due_at"] is not None
    assert claimed(c, "sleeper") == 2
    assert [ln for ln in lines(fx) if not ln.startswith("hold")] == [
        "delivery 1",
        "before",
        "delivery 2",
    ]


def test_reused_id_is_caught_and_the_old_result_is_untouched(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "order", ORDER)
    write_workflow(
        daemon,
        "refund",
        """
        @ys.workflow
        def main(step, params):
            return step.run("refund", note, params["d"], "refund")
    """,
    )
    c = daemon.client()
    c.trigger("order", {"d": str(fx), "order": 42}, execution_id="order-42")
    done = c.wait("order-42", timeout=20)
    assert done["outcome"] == {"status": "completed", "result": {"charged": "charge 42"}}
    length = c.describe("order-42")["history_length"]

    attempts = [
        dict(workflow="order", params={"d": str(fx), "order": 43}),  # new params, same ID
        dict(workflow="refund", params={"d": str(fx)}),  # another workflow, same ID
        dict(workflow="order", params={"d": str(fx), "order": 43}, if_exists="use-existing"),
        dict(workflow="order", params={"d": str(fx), "order": 42}),  # even the same request
    ]
    for kw in attempts:
        with pytest.raises(ys.ExecutionAdmissionError) as refused:
            c.trigger(execution_id="order-42", **kw)
        assert refused.value.code == "EXECUTION_ID_CONFLICT", kw

    # an idempotent repeat of the very same request is not a conflict, and starts nothing
    same = c.trigger(
        "order", {"d": str(fx), "order": 42}, execution_id="order-42", if_exists="use-existing"
    )
    assert same == {"execution_id": "order-42", "started": False}

    after = c.get("order-42")
    assert after == {k: v for k, v in done.items() if k != "history_length"}
    assert after["params"] == {"d": str(fx), "order": 42}
    assert c.describe("order-42")["history_length"] == length
    assert lines(fx) == ["charge 42"]
    assert c.list(workflow="refund")["executions"] == []


SUSPEND = """
@ys.workflow
def main(step, params):
    step.sleep("wait", 3600)
"""


def test_concurrent_triggers_and_big_params_are_each_admitted_once(daemon):
    # Small bodies are admitted on the daemon's event loop (sharing group commits), big ones
    # through its thread pool; either way each trigger is one execution, params intact.
    write_workflow(daemon, "parked", SUSPEND)
    c = daemon.client()
    n = 32

    def trigger(i: int) -> dict:
        with daemon.client() as own:
            return own.trigger("parked", {"i": i})

    got = Threads(n, trigger).results()
    assert all(isinstance(g, dict) and g["started"] for g in got), got
    ids = [g["execution_id"] for g in got]  # type: ignore[index]
    assert len(set(ids)) == n
    assert sorted(c.get(i)["params"]["i"] for i in ids) == list(range(n))

    # Just under 2 MiB encoded (UTF-8), far past the event loop's small-body size; the body
    # is sent as UTF-8, so it is about as big as the params' canonical encoding.
    big = {"blob": "é" * 1_048_000}
    assert c.trigger("parked", big, execution_id="big") == {"execution_id": "big", "started": True}
    assert c.get("big")["params"] == big
    with pytest.raises(ys.YsError) as too_big:
        c.trigger("parked", {"blob": "x" * (2 * 1024 * 1024)}, execution_id="too-big")
    assert too_big.value.code == "INVALID_ARGUMENT"
    assert "limit is 2 MiB" in str(too_big.value)
    with pytest.raises(ys.YsError) as no_body:  # past the daemon's body limit: says so
        c.trigger("parked", {"blob": "x" * (4 * 1024 * 1024)}, execution_id="too-big")
    assert no_body.value.code == "INVALID_ARGUMENT"
    assert "over 3 MiB" in str(no_body.value) and "2 MiB" in str(no_body.value)
    with pytest.raises(ys.YsError) as gone:
        c.get("too-big")
    assert gone.value.code == "EXECUTION_NOT_FOUND"
    with pytest.raises(ys.YsError) as surrogate:  # no UTF-8 form: refused, naming the path
        c.trigger("parked", {"path": "\udcff"}, execution_id="surrogate")
    assert surrogate.value.code == "INVALID_EXECUTION_EVENT"
    assert "params.path" in str(surrogate.value)
