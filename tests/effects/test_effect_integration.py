"""RFC 004's integration table: the EffectClient through delivery acknowledgement, with a real
daemon (workers are subprocesses that can be SIGKILLed) or ys.testing where the row allows.

| Interruption                                                  | Observable outcome           |
| wait commits, then the worker fails before the unfinished    | lease released; the next     |
|   step record                                                 |   delivery reuses the first  |
|                                                               |   registration and wake      |
| the unfinished step record commits, then the worker fails    | lease released; the next     |
|   before replying                                             |   delivery remains safe      |
| a requested wake becomes due                                  | delivered once; the          |
|                                                               |   acknowledgement clears it  |
| settle commits with waiting executions                        | each is woken and reads the  |
|                                                               |   settled result             |
| the EffectClient fails inside the worker                      | retry; lease released; no    |
|                                                               |   step result                |
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from effects_support import (
    T0,
    DaemonHandle,
    FakeClient,
    FakeProvider,
    events,
    kinds,
    script,
    wait_until,
)
from fake_provider import FileProvider

import ys
from ys import codec
from ys.testing import WorkflowTest

OP = "charge.v1"

# A workflow whose provider is "down" (perform times out, lookup answers Unknown) until the
# test creates <dir>/provider-up; then it is the file-ledger provider.
PAY = """
def provider(params):
    p = FileProvider(params["ledger"])
    up = pathlib.Path(params["dir"], "provider-up")

    def perform(effect_id):
        if not up.exists():
            raise TimeoutError("the provider did not answer")
        return p.perform(effect_id, params.get("amount", 49.99))

    def lookup(effect_id):
        if not up.exists():
            return ys.Unknown()
        return p.lookup(effect_id)

    return perform, lookup


def charge(step, params):
    perform, lookup = provider(params)
    return step.effect("charge", effect_id=params["effect_id"], operation="charge.v1",
                       input={"amount": params.get("amount", 49.99)}, perform=perform,
                       lookup=lookup, retry_in=params.get("retry_in", 60))
"""


def params(tmp_path: Path, effect_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "ledger": str(tmp_path / "ledger.jsonl"),
        "dir": str(tmp_path),
        "effect_id": effect_id,
        **extra,
    }


def effect(client: Any, effect_id: str) -> dict[str, Any]:
    out: dict[str, Any] = client.transport.request(
        "GET", f"/v1/effects/{quote(effect_id, safe='')}"
    )
    return out


def kind_seq(client: Any, execution_id: str) -> list[str]:
    return [e["kind"] for e in events(client, execution_id)]


def step_events(client: Any, execution_id: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events(client, execution_id) if e["kind"] == "step"]


def suspended_after_release(client: Any, execution_id: str) -> bool:
    ks = kind_seq(client, execution_id)
    return "released" in ks and ks[-1] == "suspended"


# -- wait commits, then the worker fails before the unfinished step record -----------------------


def test_wait_committed_then_worker_killed_before_the_step_record_reuses_the_first_wake(
    ys_home: DaemonHandle, tmp_path: Path
) -> None:
    ys_home.env["YS_CRASH_POINTS"] = f"effect.after_wait@{tmp_path / 'killed-after-wait'}"
    daemon = ys_home.start()
    script(
        daemon,
        "pay",
        PAY
        + """
@ys.workflow
def main(step, params):
    return charge(step, params)
""",
    )
    c = daemon.client()
    eid = c.trigger("pay", params(tmp_path, "eff:after-wait", retry_in=30), execution_id="pay-1")[
        "execution_id"
    ]
    wait_until(lambda: suspended_after_release(c, eid), message="a suspension after the kill")

    evs = events(c, eid)
    ks = [e["kind"] for e in evs]
    # delivery 1: wait committed (its wake request), then SIGKILL: no step, released
    first = ks[ks.index("claimed") : ks.index("released")]
    assert "step" not in first and "wake_requested" in first
    released = evs[ks.index("released")]["data"]
    assert released["reason"] == "worker_failed"
    assert "status -9" in released["detail"]
    wakes = [e["data"] for e in evs if e["kind"] == "wake_requested"]
    assert len(wakes) == 1  # the repeated wait added no wake request
    # delivery 2: the same registration; the unfinished step carries the first wake
    (waiting,) = step_events(c, eid)
    assert waiting["status"] == "waiting"
    assert waiting["wake_at"] == wakes[0]["due_at"]
    registered = effect(c, "eff:after-wait")
    assert registered["status"] == "pending"
    assert len(registered["waiters"]) == 1
    assert registered["waiters"][0]["execution_id"] == eid
    assert c.describe(eid)["steps"][0]["wake_at"] == registered["waiters"][0]["wake_at"]
    assert (tmp_path / "killed-after-wait").exists()
    assert FileProvider(tmp_path / "ledger.jsonl").charges() == []

    (tmp_path / "provider-up").touch()
    c.wake(eid)  # rather than waiting 30 s for the registered wake
    record = c.wait(eid, timeout=30)
    (charge,) = FileProvider(tmp_path / "ledger.jsonl").charges()
    assert record["outcome"] == {"status": "completed", "result": charge}
    assert effect(c, "eff:after-wait")["waiters"] == []


# -- the unfinished step record commits, then the worker fails before replying ------------------


def test_unfinished_step_recorded_then_worker_killed_before_replying_keeps_the_next_delivery_safe(
    shared_daemon: DaemonHandle, tmp_path: Path
) -> None:
    c = shared_daemon.client()
    script(
        shared_daemon,
        "pay-kill-after-record",
        PAY
        + """
@ys.workflow
def main(step, params):
    backend = step._backend
    save_step = backend.save_step
    marker = pathlib.Path(params["dir"], "killed-after-record")

    def save_then_die(key, step):
        out = save_step(key, step)
        if step.status == "waiting" and not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)  # the record committed; no reply is sent
        return out

    backend.save_step = save_then_die
    return charge(step, params)
""",
    )
    eid = c.trigger(
        "pay-kill-after-record",
        params(tmp_path, "eff:after-record", retry_in=30),
        execution_id="pay-2",
    )["execution_id"]
    wait_until(lambda: suspended_after_release(c, eid), message="a suspension after the kill")

    ks = kind_seq(c, eid)
    assert ks.count("claimed") == 2
    first = ks[ks.index("claimed") : ks.index("released")]
    assert "step" in first and "suspended" not in first  # recorded, never acknowledged
    deliveries = c.describe(eid)["deliveries"]
    assert deliveries[0]["outcome"] == "retry (worker_failed)"
    assert deliveries[1]["outcome"] == "suspended"
    steps = step_events(c, eid)
    assert [s["status"] for s in steps] == ["waiting", "waiting"]
    assert steps[0]["wake_at"] == steps[1]["wake_at"]  # the same registration and wake
    assert len(effect(c, "eff:after-record")["waiters"]) == 1

    (tmp_path / "provider-up").touch()
    c.wake(eid)
    record = c.wait(eid, timeout=30)
    provider = FileProvider(tmp_path / "ledger.jsonl")
    (charge,) = provider.charges()
    assert record["outcome"] == {"status": "completed", "result": charge}
    # the only perform that reached the provider came after a lookup proved nothing existed
    assert provider.calls() == ["lookup eff:after-record not-found", "perform eff:after-record"]


# -- a requested wake becomes due ---------------------------------------------------------------


def test_requested_wake_becoming_due_is_delivered_once_and_acknowledgement_clears_it() -> None:
    answers: list[Any] = [ys.Unknown(), ys.Unknown(), ys.Settled({"charge_id": "ch_1"})]
    lookups: list[float] = []

    def main(step: ys.Step, params: Any) -> Any:
        def lookup(effect_id: str) -> Any:
            lookups.append(step._backend.now())
            return answers.pop(0)

        return step.effect(
            "charge",
            effect_id="eff",
            operation=OP,
            input={},
            perform=lambda e: {"charge_id": "ch_1"},
            lookup=lookup,
            retry_in=30,
        )

    with WorkflowTest({"charge-order": main}, start=T0) as t:
        t.store.effect_begin(OP, "eff", {}, "support-tool", "check", now=T0)  # already pending
        eid = t.trigger("charge-order", {})
        assert t.run() == 1
        assert t.get(eid)["status"] == "suspended"
        assert t.store.get(eid).due_at == T0 + 30  # type: ignore[union-attr]

        t.advance(29.9)
        assert t.run() == 0  # not yet due
        t.advance(0.1)
        assert t.run() == 1  # delivered once
        assert lookups == [T0, T0 + 30]
        # lookup said Unknown again: the acknowledged delivery cleared the old wake; only
        # the new one is pending
        assert t.store.get(eid).due_at == T0 + 60  # type: ignore[union-attr]
        assert t.run() == 0
        t.advance(30)
        assert t.run() == 1
        record = t.get(eid)
        assert record["outcome"] == {"status": "completed", "result": {"charge_id": "ch_1"}}
        assert t.store.get(eid).due_at is None  # type: ignore[union-attr]
        t.advance(3600)
        assert t.run() == 0
        assert t.deliveries == 3
        assert t.store.effect("eff").waiters == ()  # type: ignore[union-attr]


# -- settle commits with waiting executions -----------------------------------------------------


def test_settle_committing_with_waiting_executions_wakes_each_and_each_reads_the_result(
    shared_daemon: DaemonHandle, tmp_path: Path
) -> None:
    c = shared_daemon.client()
    script(
        shared_daemon,
        "pay-wait",
        PAY
        + """
@ys.workflow
def main(step, params):
    return charge(step, params)
""",
    )
    effect_id = "eff:two-waiters"
    ids = []
    for n in (1, 2):
        ids.append(
            c.trigger(
                "pay-wait", params(tmp_path, effect_id, retry_in=3600), execution_id=f"waiter-{n}"
            )["execution_id"]
        )

    def both_registered() -> bool:
        e = effect(c, effect_id)
        return len(e["waiters"]) == 2 and all(c.get(i)["status"] == "suspended" for i in ids)

    wait_until(both_registered, message="two registered waiters, both suspended")
    assert {w["execution_id"] for w in effect(c, effect_id)["waiters"]} == set(ids)

    # another runtime (say a support tool that asked the provider) settles the effect
    result = {"charge_id": "ch_support", "amount": 49.99}
    answer = c.transport.request(
        "POST",
        f"/v1/effects/{quote(effect_id, safe='')}/settle",
        {"operation": OP, "result": codec.dumps(result)},
    )
    assert answer == {"status": "settled", "result": codec.dumps(result)}

    for i in ids:
        record = c.wait(i, timeout=30)
        assert record["outcome"] == {"status": "completed", "result": result}
        assert [s["status"] for s in step_events(c, i)] == ["waiting", "completed"]
    after = effect(c, effect_id)
    assert after["status"] == "settled" and after["waiters"] == []
    assert FileProvider(tmp_path / "ledger.jsonl").calls() == []  # nobody asked the provider


# -- the EffectClient fails inside the worker ---------------------------------------------------


@pytest.mark.parametrize("method", ["effect_begin", "effect_settle", "effect_wait"])
def test_effect_client_failing_in_process_releases_the_lease_with_client_unavailable(
    monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    with WorkflowTest(
        {
            "charge-order": lambda step, params: step.effect(
                "charge",
                effect_id="eff",
                operation=OP,
                input={},
                perform=provider.perform,
                lookup=provider.lookup,
                retry_in=30,
            )
        },
        start=T0,
    ) as t:
        provider = FakeProvider(FakeClient())  # (the fake client only records the calls)
        if method == "effect_wait":
            t.store.effect_begin(OP, "eff", {}, "elsewhere", "check", now=T0)
            provider.lookup_script.append(lambda e: ys.Unknown())
        real = getattr(t.store, method)
        failures = [ConnectionResetError("connection reset by peer")]

        def flaky(*args: Any, **kw: Any) -> Any:
            if failures:
                raise failures.pop()
            return real(*args, **kw)

        monkeypatch.setattr(t.store, method, flaky)
        eid = t.trigger("charge-order", {})
        (d,) = t.store.claim_due(limit=1)
        t._deliver(d)

        record = t.store.get(eid)
        assert record is not None and record.status == "admitted"  # released, no outcome
        assert t.store.held_leases() == []
        assert t.store.steps(eid) == []
        (delivery,) = t.store.describe(eid).deliveries
        assert delivery.outcome == "retry (worker_failed)"
        assert delivery.detail is not None and delivery.detail.startswith(
            "EFFECT_CLIENT_UNAVAILABLE"
        )
        assert t.store.effect("eff") is None or t.store.effect("eff").status == "pending"  # type: ignore[union-attr]

        if method == "effect_wait":
            t.advance(1)
            provider.lookup_script.append(lambda e: ys.NotFound())
        t.run()
        assert t.get(eid)["outcome"]["status"] == "completed"
        assert len(provider.charges) == 1


def test_effect_client_failing_in_a_worker_replies_retry_and_the_next_delivery_completes(
    shared_daemon: DaemonHandle, tmp_path: Path
) -> None:
    c = shared_daemon.client()
    script(
        shared_daemon,
        "pay-settle-fails",
        PAY
        + """
@ys.workflow
def main(step, params):
    backend = step._backend
    settle = backend.effect_settle
    marker = pathlib.Path(params["dir"], "settle-failed")

    def settle_fails_once(*args):
        if not marker.exists():
            marker.touch()
            raise ConnectionResetError("connection reset by peer")  # as a dropped socket
        return settle(*args)

    backend.effect_settle = settle_fails_once
    return charge(step, params)
""",
    )
    (tmp_path / "provider-up").touch()
    eid = c.trigger(
        "pay-settle-fails", params(tmp_path, "eff:settle-fails"), execution_id="pay-settle-fails"
    )["execution_id"]
    record = c.wait(eid, timeout=30)
    provider = FileProvider(tmp_path / "ledger.jsonl")
    (charge,) = provider.charges()
    assert record["outcome"] == {"status": "completed", "result": charge}

    first, second = c.describe(eid)["deliveries"]
    assert first["outcome"] == "retry (worker_failed)"
    assert "status 75" in first["detail"]
    assert "EFFECT_CLIENT_UNAVAILABLE" in first["detail"]
    assert second["outcome"] == "completed"
    ks = kind_seq(c, eid)
    assert "step" not in ks[: ks.index("released")]  # the failed delivery recorded no step
    # the charge made before settle failed was found by lookup, not made again
    assert provider.calls() == ["perform eff:settle-fails", "lookup eff:settle-fails settled"]
    log = (shared_daemon.home / "logs" / quote(eid, safe="") / "1.log").read_text()
    assert "ys: EFFECT_CLIENT_UNAVAILABLE" in log


def test_invalid_callback_result_in_a_worker_is_retried_with_handler_invalid_and_no_step(
    shared_daemon: DaemonHandle, tmp_path: Path
) -> None:
    c = shared_daemon.client()
    script(
        shared_daemon,
        "pay-returns-a-set",
        """
@ys.workflow
def main(step, params):
    return step.effect("charge", effect_id=params["effect_id"], operation="charge.v1",
                       input={"amount": 49.99}, perform=lambda effect_id: {"ch_1", "ch_2"},
                       lookup=lambda effect_id: ys.NotFound(), retry_in=60)
""",
    )
    eid = c.trigger(
        "pay-returns-a-set",
        {"effect_id": "eff:handler-invalid"},
        execution_id="pay-handler-invalid",
    )["execution_id"]

    def released_twice() -> list[dict[str, Any]]:
        ds = c.describe(eid)["deliveries"]
        return ds if len([d for d in ds if d["outcome"] == "retry (worker_failed)"]) >= 2 else []

    deliveries = wait_until(released_twice, message="two released deliveries")
    for d in deliveries[:2]:
        assert d["outcome"] == "retry (worker_failed)"
        assert "status 75" in d["detail"]
        assert "EFFECT_HANDLER_INVALID" in d["detail"]
    described = c.describe(eid)
    assert described["steps"] == []
    assert described["status"] in ("admitted", "running")
    assert "completed" not in kinds(c, eid) and "failed" not in kinds(c, eid)
    assert effect(c, "eff:handler-invalid")["status"] == "pending"  # retained
    log = (shared_daemon.home / "logs" / quote(eid, safe="") / "1.log").read_text()
    assert "ys: EFFECT_HANDLER_INVALID" in log and "set" in log

    c.cancel(eid)  # stop the retries; cancelling leaves the effect pending (RFC 009)
    assert c.wait(eid, timeout=30)["status"] == "cancelled"
    assert effect(c, "eff:handler-invalid")["status"] == "pending"


def test_effect_routes_take_no_delivery_token(shared_daemon: DaemonHandle) -> None:
    """begin, settle and wait are not fenced: a client with no token may call them."""
    c = shared_daemon.client()
    path = f"/v1/effects/{quote('eff:no-token', safe='')}"
    assert getattr(c.transport, "token", None) is None
    begin = {"operation": OP, "input": {"amount": 1}, "execution_id": "x", "step_key": "k"}
    assert c.transport.request("POST", path + "/begin", begin) == {"status": "new"}
    assert c.transport.request("POST", path + "/begin", begin) == {"status": "pending"}
    assert c.transport.request("POST", path + "/settle", {"operation": OP, "result": "1"}) == {
        "status": "settled",
        "result": "1",
    }
