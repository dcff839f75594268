"""The worker channel (ys/worker/channel.py, ys/daemon/channel.py): a delivery saves its steps over
the socket its launch came on, and a daemon killed between a save and its answer loses
nothing: the step is either recorded and not run again, or not recorded and run again.

Deterministic: YS_CRASH_POINTS SIGKILLs the daemon at the named point of the first save
(`channel.before_save`: nothing written; `channel.after_save`: committed, not answered) or of
the first pipelined suspension (a waiting step and the `suspended` outcome, sent together:
`channel.before_suspend`, `channel.after_suspend`).
"""

from __future__ import annotations

import pytest

from tests.support import events, fixture_dir, lines, prelude, wait_until, write_script

STEPS = """
@ys.workflow
def main(step, params):
    d = params["d"]
    return [step.run(f"s{i}", note, d, f"s{i}") for i in range(3)]
"""

# A step whose first attempt fails: its retry waits (a pipelined suspension), the second
# attempt succeeds. Each attempt notes its number.
RETRIED = """
def flaky(d):
    n = len([ln for ln in open(os.path.join(d, "effects")).read().splitlines()
             if ln.startswith("attempt")]) if os.path.exists(os.path.join(d, "effects")) else 0
    note(d, f"attempt {n + 1}")
    if n == 0:
        raise RuntimeError("the first attempt fails")
    return n + 1


@ys.workflow
def main(step, params):
    d = params["d"]
    got = step.run("flaky", flaky, d, retry=ys.Retry(max_attempts=3, interval=0.2))
    return [got, step.run("after", note, d, "after")]
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


def test_a_retried_step_suspends_and_resumes_over_the_channel(daemon, tmp_path):
    d = fixture_dir(tmp_path)
    write_script(daemon, "retried", RETRIED, prelude(start_pid=False))
    with daemon.client() as c:
        eid = c.trigger("retried", {"d": str(d)})["execution_id"]
        record = c.wait(eid, timeout=60)
        assert record["status"] == "completed", record
        assert record["outcome"]["result"] == [2, "after"]
        kinds = [e["kind"] for e in events(c, eid)]
    assert lines(d) == ["attempt 1", "attempt 2", "after"]
    assert kinds.count("suspended") == 1  # the waiting step and its suspension, once


def _crash_then_finish(ys_home, tmp_path, script, body, point):
    """Run `script` until the daemon kills itself at `point`, restart it, wait for the
    outcome; (lines noted before the crash, the record, the step keys in its history)."""
    d = fixture_dir(tmp_path)
    write_script(ys_home, script, body, prelude(start_pid=False))
    marker = tmp_path / "crashed"
    ys_home.env["YS_CRASH_POINTS"] = f"{point}@{marker}"
    ys_home.start()
    with ys_home.client() as c:
        eid = c.trigger(script, {"d": str(d)})["execution_id"]
    assert ys_home.proc is not None
    assert ys_home.proc.wait(timeout=30) == -9, ys_home.log()[-2000:]
    assert marker.exists()
    before = lines(d)

    del ys_home.env["YS_CRASH_POINTS"]
    ys_home.start()
    with ys_home.client() as c:
        record = wait_until(
            lambda: (r := c.get(eid))["status"] == "completed" and r,
            timeout=60,
            message=f"{eid} completed",
        )
        saved = [e["data"]["key"] for e in events(c, eid) if e["kind"] == "step"]
    return d, before, record, saved


@pytest.mark.parametrize(
    "point, effects",
    [
        ("channel.before_save", ["s0", "s0", "s1", "s2"]),  # not recorded: run again
        ("channel.after_save", ["s0", "s1", "s2"]),  # recorded: never run again
    ],
)
def test_a_daemon_killed_between_a_save_and_its_answer_loses_no_step(
    ys_home, tmp_path, point, effects
):
    d, before, record, saved = _crash_then_finish(ys_home, tmp_path, "three", STEPS, point)
    assert before == ["s0"]  # s0 ran once before the daemon died
    assert record["outcome"]["result"] == ["s0", "s1", "s2"]
    assert lines(d) == effects
    assert saved == ["s0", "s1", "s2"]  # each recorded once


@pytest.mark.parametrize(
    "point, saved",
    [
        # not recorded: the failed attempt is not known, so it runs again as attempt 1
        ("channel.before_suspend", [("flaky", "completed", 1), ("after", "completed", 1)]),
        # recorded with its wake: the next delivery runs attempt 2 once it is due
        (
            "channel.after_suspend",
            [("flaky", "waiting", 1), ("flaky", "completed", 2), ("after", "completed", 1)],
        ),
    ],
)
def test_a_daemon_killed_between_a_pipelined_suspension_and_its_answer_loses_no_step(
    ys_home, tmp_path, point, saved
):
    d = fixture_dir(tmp_path)
    _, before, record, _ = _crash_then_finish(ys_home, tmp_path, "retried", RETRIED, point)
    assert before == ["attempt 1"]
    assert record["outcome"]["result"] == [2, "after"]
    assert lines(d) == ["attempt 1", "attempt 2", "after"]  # the body ran twice in all
    with ys_home.client() as c:
        steps = [e["data"] for e in events(c, record["execution_id"]) if e["kind"] == "step"]
    assert [(s["key"], s["status"], s.get("attempts", 1)) for s in steps] == saved
    ys_home.stop()
