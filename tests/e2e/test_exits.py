"""A Python workflow whose own code exits (sys.exit, a raised KeyboardInterrupt), in its body or
in a step's, ends with that as its outcome, as a shell workflow's exit status does: failed with
the status, once, under either launcher (never a delivery to retry)."""

from __future__ import annotations

import pytest
from e2e_support import fixture_dir, kinds, lines, write_workflow

from tests.support import DaemonHandle

pytestmark = pytest.mark.e2e

EXITS = """
def leave(how):
    if how == "interrupt":
        raise KeyboardInterrupt
    sys.exit(int(how) if how.isdigit() else how)

@ys.workflow
def main(step, params):
    step.run("load", note, params["d"], params["how"])
    if params.get("in_step"):
        step.run("leave", leave, params["how"])
    else:
        leave(params["how"])
    return "unreachable"
"""


def _run(c, execution_id: str, **params) -> dict:
    c.trigger("exits", params, execution_id=execution_id)
    record: dict = c.wait(execution_id, timeout=30)
    assert "released" not in kinds(c, execution_id), kinds(c, execution_id)
    assert record["attempts"] == 1, record
    return record


@pytest.mark.parametrize("launcher", ["warm", "spawn"])
def test_sys_exit_fails_the_execution_with_its_status_in_the_body_and_in_a_step(
    ys_home: DaemonHandle, tmp_path, launcher: str
):
    ys_home.env["YS_LAUNCHER"] = launcher
    daemon = ys_home.start()
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "exits", EXITS)
    c = daemon.client()
    for execution_id, status, in_step in (("exit-body", "3", False), ("exit-step", "4", True)):
        record = _run(c, execution_id, d=str(fx), how=status, in_step=in_step)
        assert record["status"] == "failed", record
        assert record["outcome"]["error"] == {
            "name": "SystemExit",
            "message": f"exit status {status}",
            "code": "EXIT_STATUS",
        }
    assert lines(fx) == ["3", "4"]  # each ran once
    log = daemon.ys("logs", "exit-step")
    assert "SystemExit: exit status 4" in log.stdout


def test_an_exit_with_a_message_an_interrupt_and_status_zero_end_as_a_shell_exit_would(
    daemon: DaemonHandle, tmp_path
):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "exits", EXITS)
    c = daemon.client()
    said = _run(c, "exit-said", d=str(fx), how="no more work")
    assert said["outcome"]["error"] == {
        "name": "SystemExit",
        "message": "exit status 1: no more work",
        "code": "EXIT_STATUS",
    }
    interrupted = _run(c, "exit-interrupt", d=str(fx), how="interrupt", in_step=True)
    assert interrupted["status"] == "failed"
    assert interrupted["outcome"]["error"]["name"] == "KeyboardInterrupt"
    assert interrupted["outcome"]["error"]["message"].startswith("exit status 130")
    zero = _run(c, "exit-zero", d=str(fx), how="0")
    assert zero["outcome"] == {"status": "completed", "result": None}
