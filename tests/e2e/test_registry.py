"""The workflows folder as the daemon sees it while it runs: a broken script makes its
executions wait until it is fixed, and a new script is picked up without a restart."""

from __future__ import annotations

import pytest
from e2e_support import events, fixture_dir, lines, wait_until, write_workflow

pytestmark = pytest.mark.e2e


def _listed(client, name):
    return {w["name"]: w for w in client.workflows()["workflows"]}.get(name)


def test_broken_script_makes_executions_wait_then_they_complete_once_it_is_fixed(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    daemon.write(
        "fragile.py",
        """
        import ys

        @ys.workflow
        def main(step, params)
            return "never"
    """,
    )
    c = daemon.client()
    wait_until(lambda: (_listed(c, "fragile") or {}).get("error"), message="the error listed")
    assert "SyntaxError" in _listed(c, "fragile")["error"]

    assert c.trigger("fragile", {"d": str(fx)}, execution_id="fragile-1")["started"]
    wait_until(
        lambda: any(e["kind"] == "released" for e in events(c, "fragile-1")),
        message="the delivery gave up on the broken script",
    )
    released = [e["data"] for e in events(c, "fragile-1") if e["kind"] == "released"]
    assert released[0]["reason"] == "workflow_unavailable"
    record = c.get("fragile-1")
    assert record["status"] == "admitted"  # waiting, not failed
    assert record["outcome"] is None
    assert record["due_at"] is not None

    write_workflow(
        daemon,
        "fragile",
        """
        @ys.workflow
        def main(step, params):
            return step.run("work", note, params["d"], "fixed")
    """,
    )
    record = c.wait("fragile-1", timeout=20)
    assert record["outcome"] == {"status": "completed", "result": "fixed"}
    assert _listed(c, "fragile")["error"] is None
    assert lines(fx) == ["fixed"]


def test_script_added_while_the_daemon_runs_is_picked_up(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    c = daemon.client()
    assert _listed(c, "latecomer") is None
    write_workflow(
        daemon,
        "latecomer",
        """
        @ys.workflow
        def main(step, params):
            return step.run("hello", note, params["d"], "hello")
    """,
    )
    wait_until(lambda: _listed(c, "latecomer"), message="the watcher saw the new script")
    listed = _listed(c, "latecomer")
    assert listed["kind"] == "python" and listed["error"] is None
    assert listed["path"] == str(daemon.workflows / "latecomer.py")
    execution_id = c.trigger("latecomer", {"d": str(fx)})["execution_id"]
    record = c.wait(execution_id, timeout=20)
    assert record["outcome"] == {"status": "completed", "result": "hello"}
    assert lines(fx) == ["hello"]
