"""charge-order: RFC 001's story. A cooldown in case the customer cancels, then load the order
and charge it at a (fake) payment provider.

    ys trigger charge-order --id order-42 -p order=42

The fake provider is a JSON-lines ledger file (CHARGE_LEDGER, default ./ledger.jsonl beside
this script) so tests can count charges. Params: order (id), total (default 49.99),
cooldown (seconds, default 600).
"""

import json
import os
from pathlib import Path

import ys

LEDGER = Path(os.environ.get("CHARGE_LEDGER", Path(__file__).with_name("ledger.jsonl")))


def load_order(order_id):
    return {"id": order_id, "status": "open"}


def charge(order_id, total):
    """The provider: append one charge to the ledger and return its receipt."""
    receipt = {"charge": f"ch_{order_id}", "order": order_id, "amount": total}
    with open(LEDGER, "a") as f:
        f.write(json.dumps(receipt) + "\n")
    return receipt


@ys.workflow
def main(step: ys.Step, params: dict):
    step.sleep("cooldown", params.get("cooldown", 600))
    order = step.run("load", load_order, params["order"])
    if order["status"] != "open":
        return {"charged": False}
    receipt = step.run("charge", charge, order["id"], params.get("total", 49.99))
    return {"charged": True, "receipt": receipt}
