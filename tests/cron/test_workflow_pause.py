"""`ys workflows pause W` / `resume W` against a real daemon (docs/design.md, "Schedules and
paused workflows"): admissions are taken and wait, shown as "waiting: workflow paused";
resuming runs them."""

from __future__ import annotations

import json

from cron_support import out_json, wait_status, wait_until


def paused_of(h, name: str) -> bool:
    items = out_json(h.ys("workflows", "--json"))["workflows"]
    return next(w for w in items if w["name"] == name)["paused"]


def test_a_paused_workflow_admits_and_waits_until_resumed(home):
    h = home.start()
    done = out_json(h.ys("workflows", "pause", "hello", "--json"))
    assert done == {"workflow": "hello", "paused": True, "changed": True}
    assert paused_of(h, "hello") and not paused_of(h, "gate")
    assert "paused" in h.ys("workflows").stdout
    eid = h.ys("trigger", "hello", "--id", "held").stdout.strip()
    assert eid == "held"
    ps = out_json(h.ys("ps", "--json"))["executions"]
    held = next(r for r in ps if r["execution_id"] == "held")
    assert held["status"] == "admitted" and held["waiting_for"] == "workflow paused"
    assert "waiting: workflow paused" in h.ys("ps").stdout
    assert out_json(h.ys("describe", "held", "--json"))["waiting_for"] == "workflow paused"
    assert "waiting: workflow paused" in h.ys("describe", "held").stdout
    due = out_json(h.ys("top", "--json"))["due"]
    assert next(r for r in due if r["execution_id"] == "held")["waiting_for"] == "workflow paused"
    assert "admitted, waiting: workflow paused" in h.ys("top").stdout
    assert json.loads(h.ys("get", "held", "--json").stdout)["status"] == "admitted"
    again = out_json(h.ys("workflows", "pause", "hello", "--json"))
    assert again["changed"] is False
    resumed = out_json(h.ys("workflows", "resume", "hello", "--json"))
    assert resumed == {"workflow": "hello", "paused": False, "changed": True}
    assert wait_status(h, "held", "completed")["outcome"]["result"] == "hello 0"
    assert not paused_of(h, "hello")


def test_pausing_an_unknown_workflow_exits_4_and_pauses_nothing(home):
    h = home.start()
    result = h.ys("workflows", "pause", "nosuch")
    assert result.returncode == 4, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    with h.client() as c:
        assert c.workflows()["workflows"] and all(
            not w["paused"] for w in c.workflows()["workflows"]
        )
    assert h.ys("workflows", "pause").returncode == 2


def test_a_running_delivery_finishes_while_its_workflow_is_paused(home, tmp_path):
    h = home.start()
    gate = tmp_path / "gate-open"
    eid = h.ys("trigger", "gate", "--params", json.dumps({"gate": str(gate)})).stdout.strip()
    wait_status(h, eid, "running")
    assert h.ys("workflows", "pause", "gate").returncode == 0
    gate.write_text("go")
    wait_status(h, eid, "completed")
    wait_until(lambda: paused_of(h, "gate"), timeout=5, message="still paused")
