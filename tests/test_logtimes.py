"""Line times kept beside a delivery log (ys.logtimes, written by ys.daemon.capture.CappedLog):
the log stays the bytes printed, its side file says when each part came, the capped log's
tail keeps the times its lines came at; `ys logs --tail/--since` cut by them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ys import logtimes
from ys.daemon import capture

T0 = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(capture.time, "time", c)
    return c


def _line_times(log: Path) -> dict[bytes, float]:
    data = log.read_bytes()
    times = logtimes.read(log)
    assert times is not None
    offsets = [o for o, _ in times]
    out = {}
    for start in logtimes.line_starts(data):
        import bisect

        i = bisect.bisect_right(offsets, start) - 1
        end = data.find(b"\n", start)
        out[data[start : end if end != -1 else len(data)]] = times[i][1]
    return out


def test_a_log_keeps_its_bytes_and_each_lines_time_beside_it(tmp_path, clock):
    log = tmp_path / "1.log"
    out = capture.CappedLog(log, 1 << 20)
    out.write(b"one\ntw")
    clock.now += 0.3  # within a step: counted with the entry before
    out.write(b"o\n")
    clock.now += 5
    out.write(b"three\n")
    out.close()
    assert log.read_bytes() == b"one\ntwo\nthree\n"
    assert _line_times(log) == {b"one": T0, b"two": T0, b"three": T0 + 5.3}


def test_a_capped_logs_tail_keeps_the_times_its_lines_came_at(tmp_path, clock):
    log = tmp_path / "1.log"
    out = capture.CappedLog(log, 1024)  # head room 568 bytes, tail room 256
    for i in range(40):
        out.write(f"line {i:02d} {'x' * 40}\n".encode())
        clock.now += 10
    out.close()
    times = _line_times(log)
    assert times[b"line 00 " + b"x" * 40] == T0
    kept_tail = [k for k in times if k.startswith(b"line 39")]
    assert kept_tail and times[kept_tail[0]] == T0 + 390
    marker = [k for k in times if k.startswith(b"[ys: ")]
    first_kept = next(k for k in times if k.startswith(b"line") and times[k] > T0 + 200)
    assert marker and times[marker[0]] == times[first_kept]  # times only grow in the file
    assert times[first_kept] >= T0 + 340  # the tail is its last ~256 bytes


def test_since_start_picks_the_first_line_at_or_after_the_cutoff():
    data = b"a\nb\nc\n"
    times = [(0, T0), (4, T0 + 60)]
    assert logtimes.since_start(data, times, T0 + 30, None) == 4
    assert logtimes.since_start(data, times, T0 - 1, None) == 0
    assert logtimes.since_start(data, times, T0 + 61, None) == len(data)
    # a log from before line times: counted as printed at its last change
    assert logtimes.since_start(data, None, T0, T0 + 1) == 0
    assert logtimes.since_start(data, None, T0, T0 - 1) == len(data)


def test_tail_starts_counts_lines_back_across_attempts():
    one, two = b"a\nb\n", b"c\nd"  # the last line of two has no newline: it counts
    assert logtimes.tail_starts([one, two], 1) == [4, 2]
    assert logtimes.tail_starts([one, two], 3) == [2, 0]
    assert logtimes.tail_starts([one, two], 10) == [0, 0]
    assert logtimes.tail_starts([one, two], 0) == [4, 3]


def test_a_torn_last_entry_is_ignored(tmp_path):
    log = tmp_path / "1.log"
    log.write_bytes(b"a\n")
    logtimes.times_path(log).write_text(f"0 {T0}\n2 18")
    assert logtimes.read(log) == [(0, T0)]
    assert logtimes.read(tmp_path / "2.log") is None
