"""charge-order: RFC 001's story. A cooldown in case the customer cancels, then load the order
and charge it, exactly once, at a (fake) payment provider.

    ys trigger charge-order --id order-42 -p order=42 -p cooldown=5

The provider is a JSON-lines ledger (CHARGE_LEDGER, default ledger.jsonl beside this script)
that keeps the promises step.effect needs (RFC 004): one charge per effect ID however often
`charge` is called, and `lookup` says for sure whether a charge exists. Params: order (id),
total (default 49.99), cooldown (seconds, default 600).
"""

import fcntl
import json
import os
from pathlib import Path

import ys

LEDGER = Path(os.environ.get("CHARGE_LEDGER", Path(__file__).with_name("ledger.jsonl")))


def _charges():
    if not LEDGER.exists():
        return {}
    with open(LEDGER) as f:
        return {c["effect_id"]: c for c in map(json.loads, f) if c}


def charge(effect_id, order_id, amount):
    """The provider's charge: idempotent by effect ID."""
    with open(LEDGER, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        existing = _charges().get(effect_id)
        if existing:
            return existing
        receipt = {"effect_id": effect_id, "charge": f"ch_{order_id}", "amount": amount}
        f.write(json.dumps(receipt) + "\n")
        return receipt


def lookup(effect_id):
    """The provider's answer after an uncertain attempt: settled, or proven absent."""
    found = _charges().get(effect_id)
    return ys.Settled(found) if found else ys.NotFound()


def load_order(order_id):
    return {"id": order_id, "status": "open", "total": 49.99}


@ys.workflow
def main(step: ys.Step, params: dict):
    step.sleep("cooldown", params.get("cooldown", 600))
    order = step.run("load", load_order, params["order"])
    if order["status"] != "open":
        return {"charged": False}
    amount = params.get("total", order["total"])
    effect_id = f"shop:charge:order-{order['id']}"
    receipt = step.effect(
        "charge",
        effect_id=effect_id,
        operation="charge.v1",
        input={"amount": amount},
        perform=lambda eid: charge(eid, order["id"], amount),
        lookup=lookup,
        retry_in=60,
    )
    return {"charged": True, "receipt": receipt}
