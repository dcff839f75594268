"""`ys cancel --status S [--workflow W] [--since DUR] [--tag k=v]`: every not-finished match
cancelled through the daemon's cancel route, one ID per line; bad filters change nothing."""

from __future__ import annotations

import pytest
from cli_support import one_error_line, out_json, wait_status


def _record(daemon, execution_id: str) -> dict:
    with daemon.client() as c:
        return c.get(execution_id)


def _populate(daemon, tmp_path) -> None:
    """n1, n2 (nap, suspended), n3 (nap, tag team=a, suspended), h1 (hello, admitted, due in
    an hour), g1 (gate, running), b1 (boom, failed), c1 (hello, completed)."""
    ys = daemon.ys
    for execution_id in ("n1", "n2"):
        assert ys("trigger", "nap", "--id", execution_id).returncode == 0
    assert ys("trigger", "nap", "--id", "n3", "--tag", "team=a").returncode == 0
    assert ys("trigger", "hello", "--id", "h1", "--in", "1h").returncode == 0
    gate = tmp_path / "gate"
    assert ys("trigger", "gate", "--id", "g1", "-p", f"gate={gate}").returncode == 0
    assert ys("trigger", "boom", "--id", "b1").returncode == 0
    assert ys("trigger", "hello", "--id", "c1").returncode == 0
    for execution_id in ("n1", "n2", "n3"):
        wait_status(daemon, execution_id, "suspended")
    wait_status(daemon, "g1", "running")
    wait_status(daemon, "b1", "failed")
    wait_status(daemon, "c1", "completed")


def test_cancel_by_filters_cancels_each_match_once_and_prints_its_id(fresh, tmp_path):
    _populate(fresh, tmp_path)
    tagged = fresh.ys("cancel", "--status", "suspended", "--workflow", "nap", "--tag", "team=a")
    assert tagged.returncode == 0, tagged.stderr
    assert tagged.stdout == "n3\n"
    assert wait_status(fresh, "n3", "cancelled")["outcome"] == {"status": "cancelled"}
    assert _record(fresh, "n1")["status"] == "suspended"

    rest = fresh.ys("cancel", "--status", "suspended", "--status", "admitted", "--json")
    assert rest.returncode == 0, rest.stderr
    assert out_json(rest) == {"cancelled": ["h1", "n2", "n1"]}  # newest admitted first
    for execution_id in ("h1", "n2", "n1"):
        wait_status(fresh, execution_id, "cancelled")

    running = fresh.ys("cancel", "--workflow", "gate", "--now")  # every not-finished status
    assert running.returncode == 0, running.stderr
    assert running.stdout == "g1\n"
    assert wait_status(fresh, "g1", "cancelled")["outcome"] == {"status": "cancelled"}

    # finished executions are no match; a second run finds nothing left to cancel
    assert _record(fresh, "b1")["status"] == "failed"
    assert _record(fresh, "c1")["status"] == "completed"
    again = fresh.ys("cancel", "--since", "1h", "--json")
    assert again.returncode == 0 and out_json(again) == {"cancelled": []}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--status", "failed"], "a cancel by status takes admitted, running or suspended"),
        (["--status", "completed"], "a cancel by status takes admitted, running or suspended"),
        (["--status", "bogus"], "a cancel by status takes admitted, running or suspended"),
        ([], "give the ID to cancel, or filters"),
        (["n1", "--status", "suspended"], "give an ID or filters, not both"),
        (["--status", "suspended", "--since", "soon"], "is not a duration"),
        (["--status", "suspended", "--tag", "team"], "must be written key=value"),
    ],
)
def test_cancel_by_filters_with_bad_input_exits_2_and_cancels_nothing(shared, args, says):
    for execution_id in ("bad-n1", "bad-n2"):
        if shared.ys("get", execution_id).returncode != 0:
            assert shared.ys("trigger", "nap", "--id", execution_id).returncode == 0
    result = shared.ys("cancel", *args)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert says in one_error_line(result, "INVALID_ARGUMENT")
    for execution_id in ("bad-n1", "bad-n2"):
        assert _record(shared, execution_id)["cancel_requested"] is False


def test_client_cancel_matching_refuses_no_filter_and_finished_statuses(shared):
    from ys.errors import InvalidArgument

    with shared.client() as c:
        with pytest.raises(InvalidArgument, match="at least one of"):
            c.cancel_matching()
        with pytest.raises(InvalidArgument, match="admitted, running or suspended"):
            c.cancel_matching(status=["suspended", "failed"])
