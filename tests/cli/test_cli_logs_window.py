"""`ys logs ID --tail N` / `--since DUR` (alone, together, with --follow) through a real
daemon: line times kept beside each delivery log; a log without them still prints."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from cli_support import Streaming, admit, one_error_line, out_json, wait_status, wait_until

from ys import logtimes


def _log(daemon, execution_id: str, attempt: int = 1) -> Path:
    [path] = daemon.home.rglob(f"logs/{execution_id}/{attempt}.log")
    return path


def _backdate(log: Path, seconds: float) -> None:
    """Make every line the log has now count as printed `seconds` earlier (the side file
    rewritten in place, digits for digits: the daemon appends to it still)."""
    side = logtimes.times_path(log)
    entries = logtimes.read(log)
    assert entries
    text = "".join(f"{o} {t - seconds:.3f}\n" for o, t in entries)
    assert len(text) == side.stat().st_size
    with open(side, "r+") as f:
        f.write(text)


def _gated_with_an_hour_old_line(daemon, execution_id: str, gate: Path) -> Path:
    """GATE printed `started`, counted as an hour ago; it prints `released` once the gate
    opens, in a later entry of the side file."""
    admit(daemon, "gate", execution_id, gate=str(gate))
    wait_until(lambda: list(daemon.home.rglob(f"logs/{execution_id}/1.times")), message="the log")
    log = _log(daemon, execution_id)
    wait_until(lambda: log.read_bytes() == b"started\n", message="started printed")
    [(_, first)] = logtimes.read(log) or [(0, 0.0)]
    # the next line gets an entry of its own once a step has passed since the first's
    wait_until(lambda: time.time() >= first + logtimes.STEP, message="a step later")
    _backdate(log, 3600)
    return log


def test_logs_since_and_tail_cut_by_line_times(shared, tmp_path):
    gate = tmp_path / "gate"
    log = _gated_with_an_hour_old_line(shared, "lw-cut", gate)
    gate.touch()
    wait_status(shared, "lw-cut", "completed")
    assert shared.ys("logs", "lw-cut", "--since", "30m").stdout == "released\n"
    assert shared.ys("logs", "lw-cut", "--since", "2h").stdout == "started\nreleased\n"
    assert shared.ys("logs", "lw-cut", "--tail", "1").stdout == "released\n"
    assert shared.ys("logs", "lw-cut", "-n", "5").stdout == "started\nreleased\n"
    assert shared.ys("logs", "lw-cut", "--tail", "0").stdout == ""
    both = shared.ys("logs", "lw-cut", "--tail", "2", "--since", "30m", "--json")
    assert out_json(both) == {
        "execution_id": "lw-cut",
        "logs": [{"attempt": 1, "text": "released\n"}],
    }
    _backdate(log, 10)  # `released` 10 s old: older than 1s however fast the commands above ran
    none = shared.ys("logs", "lw-cut", "--since", "1s", "--json")
    assert out_json(none) == {"execution_id": "lw-cut", "logs": []}


def test_tail_counts_lines_back_across_attempts(shared):
    admit(shared, "nap", "lw-two", seconds=0.2)  # attempt 1 suspends, attempt 2 finishes
    wait_status(shared, "lw-two", "completed")
    result = shared.ys("logs", "lw-two", "--tail", "3")
    assert result.stdout == "before attempt=1\nbefore attempt=2\nafter attempt=2\n"
    two = shared.ys("logs", "lw-two", "--tail", "2")
    assert two.stdout == "before attempt=2\nafter attempt=2\n"
    assert "attempt 1" not in two.stderr and "attempt 2" in two.stderr


def test_a_log_without_line_times_still_prints(shared):
    admit(shared, "hello", "lw-old", name="old")
    wait_status(shared, "lw-old", "completed")
    log = _log(shared, "lw-old")
    logtimes.times_path(log).unlink()  # as an older ys wrote it
    assert shared.ys("logs", "lw-old", "--tail", "1").stdout == "hello, old\n"
    hour_ago = time.time() - 3600
    os.utime(log, (hour_ago, hour_ago))  # counted as printed at its last change
    assert shared.ys("logs", "lw-old", "--since", "30m").stdout == ""
    assert shared.ys("logs", "lw-old", "--since", "2h").stdout == "hello, old\n"


@pytest.mark.parametrize("window", [["--tail", "1"], ["--since", "30m"]])
def test_follow_with_a_window_shows_its_lines_then_what_follows(shared, tmp_path, window):
    gate = tmp_path / "gate"
    execution_id = f"lw-follow-{window[0].strip('-')}"
    _gated_with_an_hour_old_line(shared, execution_id, gate)
    follow = Streaming(shared, "logs", execution_id, "--follow", *window)
    try:
        if window[0] == "--tail":  # the last line there is, then the rest as it comes
            wait_until(lambda: "started" in follow.lines, message="the last line")
        gate.touch()
        assert follow.finish() == 0
        expected = ["started", "released"] if window[0] == "--tail" else ["released"]
        assert follow.lines == expected
    finally:
        gate.touch()
        follow.kill()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tail", "-1"], None),
        (["--tail", "many"], None),
        (["--since", "soon"], "is not a duration"),
        (["--since", "-5m"], "is not a duration"),
    ],
)
def test_logs_window_with_bad_input_exits_2(shared, args, says):
    if shared.ys("get", "lw-bad").returncode != 0:
        admit(shared, "hello", "lw-bad")
    wait_status(shared, "lw-bad", "completed")
    result = shared.ys("logs", "lw-bad", *args)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    if says is not None:
        assert says in one_error_line(result, "INVALID_ARGUMENT")
