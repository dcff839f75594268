"""`ys wait` (exit 0 / 1 / 6), `ys logs` per attempt and `--follow`, `ys history --follow`."""

from __future__ import annotations

import json

from cli_support import Streaming, admit, one_error_line, out_json, wait_status, wait_until

# -- wait ---------------------------------------------------------------------------------------


def test_wait_exits_0_when_the_execution_completed(shared):
    admit(shared, "hello", "wt-ok")
    result = shared.ys("wait", "wt-ok", "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["outcome"]["status"] == "completed"
    people = shared.ys("wait", "wt-ok")
    assert people.returncode == 0 and "completed" in people.stdout


def test_wait_exits_1_when_the_execution_failed(shared):
    admit(shared, "boom", "wt-fail")
    result = shared.ys("wait", "wt-fail", "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["status"] == "failed"


def test_wait_exits_6_when_still_not_finished_at_the_timeout(shared):
    admit(shared, "nap", "wt-late")
    result = shared.ys("wait", "wt-late", "--timeout", "0.5", "--json")
    assert result.returncode == 6
    assert json.loads(result.stdout)["status"] in ("admitted", "running", "suspended")
    assert "wt-late is still" in one_error_line(result, "TIMEOUT")


def test_wait_for_an_unknown_id_exits_4(shared):
    result = shared.ys("wait", "wt-nobody")
    assert result.returncode == 4
    one_error_line(result, "EXECUTION_NOT_FOUND")


# -- logs ---------------------------------------------------------------------------------------


def test_logs_show_what_the_script_printed_per_attempt(shared):
    # The nap sleeps 0.2 s: delivery 1 suspends, delivery 2 finishes.
    admit(shared, "nap", "lg-two", seconds=0.2)
    wait_status(shared, "lg-two", "completed")
    whole = shared.ys("logs", "lg-two")
    assert whole.returncode == 0
    assert whole.stdout == "before attempt=1\nbefore attempt=2\nafter attempt=2\n"
    assert "attempt 1" in whole.stderr and "attempt 2" in whole.stderr
    second = shared.ys("logs", "lg-two", "--attempt", "2")
    assert second.stdout == "before attempt=2\nafter attempt=2\n"
    assert out_json(shared.ys("logs", "lg-two", "--json")) == {
        "execution_id": "lg-two",
        "logs": [
            {"attempt": 1, "text": "before attempt=1\n"},
            {"attempt": 2, "text": "before attempt=2\nafter attempt=2\n"},
        ],
    }
    missing = shared.ys("logs", "lg-two", "--attempt", "5")
    assert missing.returncode == 4
    one_error_line(missing, "NOT_FOUND")
    assert shared.ys("logs", "lg-nobody").returncode == 4


def test_logs_follow_prints_as_the_script_prints_and_ends_when_it_finishes(shared, tmp_path):
    gate = tmp_path / "gate"
    admit(shared, "gate", "lg-follow", gate=str(gate))
    follow = Streaming(shared, "logs", "lg-follow", "--follow")
    try:
        wait_until(lambda: "started" in follow.lines, message="the first line")
        assert follow.proc.poll() is None  # still following: the script has not finished
        gate.touch()
        assert follow.finish() == 0
        assert follow.lines == ["started", "released"]
    finally:
        gate.touch()
        follow.kill()


# -- history --follow ---------------------------------------------------------------------------


def test_history_follow_prints_events_as_they_happen_and_ends_at_the_terminal_one(shared, tmp_path):
    gate = tmp_path / "gate"
    admit(shared, "gate", "hf-1", gate=str(gate))
    follow = Streaming(shared, "history", "hf-1", "--follow", "--json")
    try:
        wait_until(
            lambda: any('"claimed"' in line for line in follow.lines), message="the claimed event"
        )
        assert follow.proc.poll() is None
        assert not any('"completed"' in line for line in follow.lines)
        gate.touch()
        assert follow.finish() == 0
        events = [json.loads(line) for line in follow.lines]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert events[0]["kind"] == "admitted" and events[-1]["kind"] == "completed"
        assert events == out_json(shared.ys("history", "hf-1", "--json"))["events"]
    finally:
        gate.touch()
        follow.kill()


def test_history_follow_of_a_finished_execution_prints_all_and_returns(shared):
    admit(shared, "boom", "hf-done")
    wait_status(shared, "hf-done", "failed")
    result = shared.ys("history", "hf-done", "--follow")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert "admitted" in lines[0] and "failed" in lines[-1]
