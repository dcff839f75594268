"""`ys trigger W --in DUR` / `--at TIME` and `Client.trigger(due_in=, due_at=)`: admitted now,
due later; `ps` shows it due, `wake` runs it now, `cancel` cancels it; bad input admits
nothing (exit 2)."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from cli_support import one_error_line, out_json, wait_status

from ys.errors import InvalidArgument, NotFound


def _epoch(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _absent(daemon, execution_id: str) -> bool:
    with daemon.client() as c, pytest.raises(NotFound):
        c.get(execution_id)
    return True


def test_trigger_in_admits_now_and_is_due_later_in_ps_and_the_overview(shared):
    before = time.time()
    result = shared.ys("trigger", "hello", "--id", "later/in", "--in", "1h", "--json")
    assert result.returncode == 0, result.stderr
    assert out_json(result) == {"execution_id": "later/in", "started": True}
    record = out_json(shared.ys("get", "later/in", "--json"))
    assert record["status"] == "admitted" and record["attempts"] == 0
    assert before + 3600 - 1 <= _epoch(record["due_at"]) <= time.time() + 3600 + 1
    ps = out_json(shared.ys("ps", "--json"))
    [shown] = [r for r in ps["executions"] if r["execution_id"] == "later/in"]
    assert shown["due_at"] == record["due_at"]
    people = shared.ys("ps")
    assert "later/in" in people.stdout
    with shared.client() as c:
        due = [r["execution_id"] for r in c.overview()["due"]]
    assert "later/in" in due  # the dashboard's Now page and `ys top` list it as due
    history = out_json(shared.ys("history", "later/in", "--json"))["events"]
    assert history[0]["kind"] == "admitted" and history[0]["data"]["due_at"] == record["due_at"]


def test_wake_runs_an_execution_due_later_now(shared):
    assert shared.ys("trigger", "hello", "--id", "later/wake", "--in", "2h").returncode == 0
    assert shared.ys("wake", "later/wake").returncode == 0
    assert wait_status(shared, "later/wake", "completed")["attempts"] == 1


def test_cancel_cancels_an_execution_due_later(shared):
    assert shared.ys("trigger", "hello", "--id", "later/cancel", "--in", "2h").returncode == 0
    assert shared.ys("cancel", "later/cancel").returncode == 0
    record = wait_status(shared, "later/cancel", "cancelled")
    assert record["outcome"] == {"status": "cancelled"}
    assert record["due_at"] is None


def test_an_execution_due_in_a_moment_runs_when_due_not_at_admission(shared):
    result = shared.ys("trigger", "hello", "--id", "later/soon", "--in", "3s")
    assert result.returncode == 0, result.stderr
    record = out_json(shared.ys("get", "later/soon", "--json"))
    assert record["status"] == "admitted" and record["attempts"] == 0  # not claimed yet
    done = wait_status(shared, "later/soon", "completed")
    assert _epoch(done["updated_at"]) >= _epoch(record["due_at"])


def test_trigger_at_with_a_zone_is_due_then(shared):
    result = shared.ys(
        "trigger", "hello", "--id", "later/at-zone", "--at", "2099-06-01T12:30:00+02:00"
    )
    assert result.returncode == 0, result.stderr
    record = out_json(shared.ys("get", "later/at-zone", "--json"))
    assert record["due_at"] == "2099-06-01T10:30:00.000Z"


def test_trigger_at_without_a_zone_is_local_time(shared):
    result = shared.ys(
        "trigger",
        "hello",
        "--id",
        "later/at-local",
        "--at",
        "2099-06-01 12:30",
        env={"TZ": "Asia/Kolkata"},  # UTC+05:30, no summer time
    )
    assert result.returncode == 0, result.stderr
    record = out_json(shared.ys("get", "later/at-local", "--json"))
    assert record["due_at"] == "2099-06-01T07:00:00.000Z"


def test_trigger_at_a_time_past_is_due_now(shared):
    result = shared.ys("trigger", "hello", "--id", "later/past", "--at", "2020-01-01T00:00Z")
    assert result.returncode == 0, result.stderr
    wait_status(shared, "later/past", "completed")


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--at", "tomorrow"], "--at 'tomorrow' is not an ISO 8601 time"),
        (["--at", "2026-13-01T00:00"], "is not an ISO 8601 time"),
        (["--in", "0"], "--in 0 is not later than now"),
        (["--in", "0s"], "--in 0s is not later than now"),
        (["--in", "-5m"], "is not a duration"),
        (["--in", "soon"], "is not a duration"),
        (["--in", "5m", "--at", "2099-01-01T00:00Z"], "--in and --at are both given"),
    ],
)
def test_trigger_later_with_bad_input_exits_2_and_admits_nothing(shared, options, says):
    result = shared.ys("trigger", "hello", "--id", "later/bad", *options)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert says in one_error_line(result, "INVALID_ARGUMENT")
    assert _absent(shared, "later/bad")


def test_client_trigger_due_in_and_due_at(shared):
    with shared.client() as c:
        c.trigger("hello", execution_id="later/sdk-in", due_in=3600)
        when = dt.datetime(2099, 6, 1, 12, 0, tzinfo=dt.UTC)
        c.trigger("hello", execution_id="later/sdk-at", due_at=when)
        c.trigger("hello", execution_id="later/sdk-epoch", due_at=when.timestamp())
        assert c.get("later/sdk-in")["status"] == "admitted"
        assert _epoch(c.get("later/sdk-in")["due_at"]) > time.time() + 3500
        assert c.get("later/sdk-at")["due_at"] == "2099-06-01T12:00:00.000Z"
        assert c.get("later/sdk-epoch")["due_at"] == "2099-06-01T12:00:00.000Z"
        for kw in ({"due_in": 0}, {"due_in": -1}, {"due_in": 5, "due_at": when}):
            with pytest.raises(InvalidArgument):
                c.trigger("hello", execution_id="later/sdk-bad", **kw)
    assert _absent(shared, "later/sdk-bad")


def test_the_api_refuses_due_in_and_due_at_together_and_admits_nothing(shared):
    with shared.client() as c:
        with pytest.raises(InvalidArgument) as caught:
            c._call(
                "POST",
                "/v1/executions",
                {"workflow": "hello", "execution_id": "later/api", "due_in": 5, "due_at": 1e9},
            )
        assert "due_in or due_at" in caught.value.message
        with pytest.raises(InvalidArgument):
            c._call(
                "POST",
                "/v1/executions",
                {"workflow": "hello", "execution_id": "later/api", "due_in": 0},
            )
    assert _absent(shared, "later/api")
