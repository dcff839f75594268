"""The examples the README points at run as written, from examples/workflows/."""

from __future__ import annotations

import json
import shutil

from tests.support import EXAMPLES, make_home


def test_charge_order_charges_once_even_when_the_order_is_charged_again(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    with make_home(tmp_path, CHARGE_LEDGER=str(ledger)) as h:
        for name in ("hello.py", "charge-order.py"):
            shutil.copy(EXAMPLES / name, h.workflows / name)
            (h.workflows / name).chmod(0o600)
        c = h.start().client()
        first = c.trigger("charge-order", {"order": 42, "cooldown": 0.2}, execution_id="order-42")[
            "execution_id"
        ]
        assert c.get(first)["status"] in ("admitted", "running", "suspended")
        done = c.wait(first, timeout=60)
        assert done["outcome"]["status"] == "completed", done
        receipt = done["outcome"]["result"]["receipt"]
        # a second execution for the same order finds the settled effect: no second charge
        again = c.wait(
            c.trigger("charge-order", {"order": 42, "cooldown": 0}, execution_id="order-42-2")[
                "execution_id"
            ],
            timeout=60,
        )
        assert again["outcome"]["result"]["receipt"] == receipt
        charges = [json.loads(line) for line in ledger.read_text().splitlines()]
        assert charges == [receipt]
        hello = c.wait(c.trigger("hello", {"name": "you"})["execution_id"], timeout=60)
        assert hello["outcome"]["result"] == {"greeting": "hello, you"}
