"""End to end: a real daemon, workflow workers as subprocesses, and a fake payment provider
(fake_provider.FileProvider: a JSON-lines ledger under flock) that keeps RFC 004's
external-system contract. Whatever happens to the worker, the customer pays once.

The crash sweep SIGKILLs the worker once at each interruption point of the driver table
(YS_CRASH_POINTS, a fresh daemon home per point), then lets the redelivery finish.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from effects_support import DaemonHandle, events, script, wait_until
from fake_provider import FileProvider

from ys import codec

OP = "charge.v1"

CHARGE_ORDER = """
@ys.workflow
def main(step, params):
    provider = FileProvider(params["ledger"])
    amount = params["amount"]
    gate = params.get("gate")

    def lookup(effect_id):
        if gate and not os.path.exists(gate):
            return ys.Unknown()  # the provider cannot say yet
        return provider.lookup(effect_id)

    receipt = step.effect(
        "charge",
        effect_id=f"shop:charge:order-{params['order']}",
        operation="charge.v1",
        input={"amount": amount},
        perform=lambda effect_id: provider.perform(effect_id, amount),
        lookup=lookup,
        retry_in=params.get("retry_in", 60),
    )
    return receipt
"""


def order_params(
    tmp_path: Path, order: int = 42, amount: float = 49.99, **extra: Any
) -> dict[str, Any]:
    return {"ledger": str(tmp_path / "ledger.jsonl"), "order": order, "amount": amount, **extra}


def effect_path(effect_id: str) -> str:
    return f"/v1/effects/{quote(effect_id, safe='')}"


def begin_elsewhere(client: Any, effect_id: str, amount: float = 49.99) -> None:
    """An earlier attempt (say, another runtime) began the effect: it is pending."""
    answer = client.transport.request(
        "POST",
        effect_path(effect_id) + "/begin",
        {
            "operation": OP,
            "input": {"amount": amount},
            "execution_id": "support-tool",
            "step_key": "charge",
        },
    )
    assert answer == {"status": "new"}


def parse_iso(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


# what the provider was asked, in order, after one SIGKILL at each point
EXPECTED_CALLS = {
    # began, then killed: the redelivery must not assume nothing happened
    "effect.after_begin": ["lookup {e} not-found", "perform {e}"],
    # lookup proved absence, then killed: absence is proved again before performing
    "effect.after_lookup": ["lookup {e} not-found", "lookup {e} not-found", "perform {e}"],
    # the provider charged, then killed before settle: lookup finds the charge
    "effect.after_perform": ["perform {e}", "lookup {e} settled"],
    # settled, then killed before the step result: the effect record answers
    "effect.after_settle": ["perform {e}"],
}


@pytest.mark.parametrize("point", list(EXPECTED_CALLS))
def test_worker_killed_at_each_interruption_point_charges_once_and_returns_the_charge(
    ys_home: DaemonHandle, tmp_path: Path, point: str
) -> None:
    marker = tmp_path / "killed"
    ys_home.env["YS_CRASH_POINTS"] = f"{point}@{marker}"
    daemon = ys_home.start()
    script(daemon, "charge-order", CHARGE_ORDER)
    c = daemon.client()
    effect_id = "shop:charge:order-42"
    if point == "effect.after_lookup":
        begin_elsewhere(c, effect_id)  # so that the first delivery looks up

    eid = c.trigger("charge-order", order_params(tmp_path), execution_id="order-42")["execution_id"]
    record = c.wait(eid, timeout=30)

    provider = FileProvider(tmp_path / "ledger.jsonl")
    (charge,) = provider.charges()  # exactly one charge
    assert charge["effect_id"] == effect_id and charge["amount"] == 49.99
    assert record["outcome"] == {"status": "completed", "result": charge}
    assert marker.exists()  # the worker really was killed there
    assert provider.calls() == [c_.format(e=effect_id) for c_ in EXPECTED_CALLS[point]]

    evs = events(c, eid)
    ks = [e["kind"] for e in evs]
    assert ks.count("claimed") == 2
    released = evs[ks.index("released")]["data"]
    assert released["reason"] == "worker_failed" and "status -9" in released["detail"]
    assert "step" not in ks[: ks.index("released")]  # the killed delivery recorded no step
    stored = c.transport.request("GET", effect_path(effect_id))
    assert stored["status"] == "settled" and stored["result"] == charge
    assert stored["conflicts"] == []

    # a second execution naming the same payment gets the stored result, with no provider call
    again = c.trigger("charge-order", order_params(tmp_path), execution_id="order-42-again")[
        "execution_id"
    ]
    assert c.wait(again, timeout=30)["outcome"] == {"status": "completed", "result": charge}
    assert provider.charges() == [charge]
    assert provider.calls() == [c_.format(e=effect_id) for c_ in EXPECTED_CALLS[point]]


# -- one daemon for the rest --------------------------------------------------------------------


@pytest.fixture(scope="module")
def shop(shared_daemon: DaemonHandle) -> DaemonHandle:
    """The shared daemon with charge-order written once (rewriting a script wakes its
    suspended executions, which would blur when a wake was due)."""
    script(shared_daemon, "charge-order", CHARGE_ORDER)
    return shared_daemon


def test_second_execution_with_the_same_effect_id_gets_the_stored_result_without_a_charge(
    shop: DaemonHandle, tmp_path: Path
) -> None:
    c = shop.client()
    first = c.trigger("charge-order", order_params(tmp_path, order=7), execution_id="o7-a")
    record = c.wait(first["execution_id"], timeout=30)
    provider = FileProvider(tmp_path / "ledger.jsonl")
    (charge,) = provider.charges()
    assert record["outcome"] == {"status": "completed", "result": charge}
    calls = provider.calls()
    assert calls == ["perform shop:charge:order-7"]

    second = c.trigger("charge-order", order_params(tmp_path, order=7), execution_id="o7-b")
    record = c.wait(second["execution_id"], timeout=30)
    assert record["outcome"] == {"status": "completed", "result": charge}
    assert provider.charges() == [charge] and provider.calls() == calls

    # the same payment with another amount is refused, not charged again
    third = c.trigger(
        "charge-order", order_params(tmp_path, order=7, amount=59.99), execution_id="o7-c"
    )
    record = c.wait(third["execution_id"], timeout=30)
    assert record["outcome"]["status"] == "failed"
    assert record["outcome"]["error"]["code"] == "EFFECT_REQUEST_MISMATCH"
    assert provider.charges() == [charge] and provider.calls() == calls


def test_concurrent_executions_of_one_payment_charge_once_and_read_one_result(
    shop: DaemonHandle, tmp_path: Path
) -> None:
    c = shop.client()
    ids = [
        c.trigger("charge-order", order_params(tmp_path, order=8), execution_id=f"o8-{n}")[
            "execution_id"
        ]
        for n in range(4)
    ]
    results = [c.wait(i, timeout=30)["outcome"] for i in ids]
    (charge,) = FileProvider(tmp_path / "ledger.jsonl").charges()
    assert results == [{"status": "completed", "result": charge}] * 4
    stored = c.transport.request("GET", effect_path("shop:charge:order-8"))
    assert stored["result"] == charge and stored["conflicts"] == []


def test_lookup_unknown_suspends_and_looks_up_again_after_retry_in_through_a_wake(
    shop: DaemonHandle, tmp_path: Path
) -> None:
    c = shop.client()
    effect_id = "shop:charge:order-9"
    begin_elsewhere(c, effect_id)  # an earlier attempt's outcome is uncertain
    gate = tmp_path / "provider-knows"
    eid = c.trigger(
        "charge-order",
        order_params(tmp_path, order=9, gate=str(gate), retry_in=0.3),
        execution_id="o9",
    )["execution_id"]

    def suspended_waiting() -> bool:
        ks = [(e["kind"], e["data"].get("status")) for e in events(c, eid)]
        return ("step", "waiting") in ks and ("suspended", None) in ks[
            ks.index(("step", "waiting")) :
        ]

    wait_until(suspended_waiting, message="the effect step waiting, the execution suspended")
    provider = FileProvider(tmp_path / "ledger.jsonl")
    assert provider.charges() == [] and provider.calls() == []  # Unknown: nothing performed
    assert c.get(eid)["status"] in ("suspended", "running")

    gate.touch()  # the provider can answer now (it has no charge: absence is proved)
    record = c.wait(eid, timeout=30)
    (charge,) = provider.charges()
    assert record["outcome"] == {"status": "completed", "result": charge}
    assert provider.calls() == [f"lookup {effect_id} not-found", f"perform {effect_id}"]

    evs = events(c, eid)
    ks = [e["kind"] for e in evs]
    assert "released" not in ks  # no delivery failed: the retries came from wakes
    first_wait = next(
        i for i, e in enumerate(evs) if e["kind"] == "step" and e["data"]["status"] == "waiting"
    )
    wake_at = parse_iso(evs[first_wait]["data"]["wake_at"])
    assert evs[first_wait + 1]["kind"] == "suspended"
    later_claim = next(e for e in evs[first_wait:] if e["kind"] == "claimed")
    assert parse_iso(later_claim["at"]) >= wake_at - 0.01, evs  # delivered when it was due
    assert ks.count("claimed") >= 2
    stored = c.transport.request("GET", effect_path(effect_id))
    assert stored["status"] == "settled" and stored["waiters"] == []
    assert codec.dumps(stored["result"]) == codec.dumps(charge)
