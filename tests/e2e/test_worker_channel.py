"""The worker channel (GET /v1/executions/{id}/channel, a WebSocket): a delivery saves its
steps over it, and a daemon killed between a step's save and its answer loses nothing: the
step is either recorded and not run again, or not recorded and run again.

Deterministic: YS_CRASH_POINTS SIGKILLs the daemon at the named point of the channel's first
save, the second step's (the first goes over HTTP, then the channel opens):
`channel.before_save`: nothing written; `channel.after_save`: committed, not answered.
"""

from __future__ import annotations

import pytest

from tests.e2e.raw_http import send
from tests.support import events, fixture_dir, lines, prelude, wait_until, write_script

STEPS = """
@ys.workflow
def main(step, params):
    d = params["d"]
    return [step.run(f"s{i}", note, d, f"s{i}") for i in range(3)]
"""


def test_steps_go_over_the_channel(daemon, tmp_path):
    d = fixture_dir(tmp_path)
    write_script(daemon, "three", STEPS, prelude(start_pid=False))
    with daemon.client() as c:
        eid = c.trigger("three", {"d": str(d)})["execution_id"]
        record = c.wait(eid, timeout=60)
        assert record["status"] == "completed", record
        assert record["outcome"]["result"] == ["s0", "s1", "s2"]
    assert lines(d) == ["s0", "s1", "s2"]


@pytest.mark.parametrize(
    "point, effects",
    [
        ("channel.before_save", ["s0", "s1", "s1", "s2"]),  # not recorded: run again
        ("channel.after_save", ["s0", "s1", "s2"]),  # recorded: never run again
    ],
)
def test_a_daemon_killed_between_a_save_and_its_answer_loses_no_step(
    ys_home, tmp_path, point, effects
):
    d = fixture_dir(tmp_path)
    write_script(ys_home, "three", STEPS, prelude(start_pid=False))
    marker = tmp_path / "crashed"
    ys_home.env["YS_CRASH_POINTS"] = f"{point}@{marker}"
    ys_home.start()
    with ys_home.client() as c:
        eid = c.trigger("three", {"d": str(d)})["execution_id"]
    assert ys_home.proc is not None
    assert ys_home.proc.wait(timeout=30) == -9, ys_home.log()[-2000:]
    assert marker.exists()
    assert lines(d) == ["s0", "s1"]  # s1 ran once before the daemon died

    del ys_home.env["YS_CRASH_POINTS"]
    ys_home.start()
    with ys_home.client() as c:
        record = wait_until(
            lambda: (r := c.get(eid))["status"] == "completed" and r,
            timeout=60,
            message=f"{eid} completed",
        )
        assert record["outcome"]["result"] == ["s0", "s1", "s2"]
        saved = [e["data"]["key"] for e in events(c, eid) if e["kind"] == "step"]
    assert lines(d) == effects
    assert saved == ["s0", "s1", "s2"]  # each recorded once


def test_the_channel_route_refuses_a_request_that_is_not_an_upgrade(daemon):
    status, body = send(
        daemon, "GET", "/v1/executions/some-id/channel", headers={"X-Ys-Token": "t"}
    )
    assert status == 400
    assert body["code"] == "INVALID_ARGUMENT"
    assert "WebSocket upgrade" in body["message"]
