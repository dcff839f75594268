"""What a delivery's processes print, and how long a delivery lasts: the log of each delivery
is capped (its head and its tail kept, with a marker line saying how much was dropped), and a
delivery ends when its script exits, whatever the script left running in the background."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support import DaemonHandle, alive, claimed, make_home, wait_until

pytestmark = pytest.mark.e2e

CAP = 64 * 1024
LINES = 60_000  # 12 bytes each: 720,000 bytes, far past the cap
MARKER = re.compile(rb"\[ys: (\d+) bytes of output dropped here[^\n]*\]\n")

PRINTER_PY = f"""
import sys
import ys

@ys.workflow
def main(step, params):
    for i in range({LINES}):
        print(f"line {{i:06d}}", file=sys.stderr if i % 7 == 0 else sys.stdout)
    return "printed"
"""

PRINTER_SH = f"""#!/bin/sh
i=0
while [ $i -lt {LINES} ]; do
    printf 'line %06d\\n' $i
    i=$((i + 1))
done
"""


def _expected() -> bytes:
    return b"".join(b"line %06d\n" % i for i in range(LINES))


@pytest.fixture(params=["warm", "spawn"])
def capped(request: pytest.FixtureRequest, tmp_path: Path) -> DaemonHandle:
    with make_home(tmp_path, YS_LOG_MAX_BYTES=str(CAP), YS_LAUNCHER=request.param) as h:
        yield h.start()


@pytest.mark.parametrize("kind", ["python", "shell"])
def test_a_delivery_log_keeps_its_head_and_tail_and_says_how_much_it_dropped(
    capped: DaemonHandle, kind: str
):
    if kind == "python":
        capped.write("printer.py", PRINTER_PY)
    else:
        capped.write("printer", PRINTER_SH, mode=0o700)
    c = capped.client()
    eid = c.trigger("printer", execution_id=f"printer-{kind}")["execution_id"]
    assert c.wait(eid, timeout=60)["status"] == "completed"

    log = (capped.home / "logs" / eid / "1.log").read_bytes()
    assert len(log) <= CAP
    marker = MARKER.search(log)
    assert marker is not None, log[-300:]
    head, tail = log[: marker.start()], log[marker.end() :]
    expected = _expected()
    dropped = int(marker.group(1))
    assert len(head) + dropped + len(tail) == len(expected)
    if kind == "shell":  # one stream: the bytes are exactly the script's
        assert expected.startswith(head) and expected.endswith(tail)
    assert head.startswith(b"line 000000\n") and tail.endswith(b"line %06d\n" % (LINES - 1))
    assert head.endswith(b"\n") and tail.startswith(b"line ")  # whole lines on both sides
    assert len(tail) >= CAP // 16  # a real tail, not a token one
    shown = capped.ys("logs", eid)
    assert shown.returncode == 0 and "bytes of output dropped here" in shown.stdout


def test_a_short_log_is_kept_whole(capped: DaemonHandle):
    capped.write(
        "hello.py",
        "import ys\n\n@ys.workflow\ndef main(step, params):\n"
        "    print('hello', flush=True)\n    return 1\n",
    )
    c = capped.client()
    eid = c.trigger("hello")["execution_id"]
    assert c.wait(eid, timeout=60)["status"] == "completed"
    assert (capped.home / "logs" / eid / "1.log").read_bytes() == b"hello\n"


# -- a delivery ends when its script exits -----------------------------------------------------


@pytest.mark.parametrize("redirect", ["", " >/dev/null 2>&1"])
def test_a_shell_workflow_ends_when_its_script_exits_and_its_background_dies(
    daemon: DaemonHandle, tmp_path: Path, redirect: str
):
    pidfile = tmp_path / "bg.pid"
    daemon.write(
        "bg",
        f"""#!/bin/sh
sleep 300{redirect} &
echo $! > {pidfile}
echo "left one behind"
""",
        mode=0o700,
    )
    c = daemon.client()
    eid = c.trigger("bg")["execution_id"]
    record = c.wait(eid, timeout=20)
    assert record["outcome"] == {
        "status": "completed",
        "result": {"exit_status": 0, "last_line": "left one behind"},
    }
    background = int(pidfile.read_text())
    wait_until(lambda: not alive(background), message="the background process to be killed")
    assert c.version()["running"] == 0  # its concurrency slot is free


def test_a_python_workflow_s_background_process_dies_with_its_delivery(
    daemon: DaemonHandle, tmp_path: Path
):
    pidfile = tmp_path / "bg.pid"
    daemon.write(
        "bgpy.py",
        f"""
import subprocess
import ys

@ys.workflow
def main(step, params):
    child = subprocess.Popen(["sleep", "300"])
    open({str(pidfile)!r}, "w").write(str(child.pid))
    return "left one behind"
""",
    )
    c = daemon.client()
    eid = c.trigger("bgpy")["execution_id"]
    assert c.wait(eid, timeout=20)["status"] == "completed"
    background = int(pidfile.read_text())
    wait_until(lambda: not alive(background), message="the background process to be killed")
    assert sorted(os.listdir(daemon.home / "logs" / eid)) == ["1.log", "1.times"]


def test_a_process_that_left_the_group_holding_the_output_pipe_does_not_hold_the_delivery(
    daemon: DaemonHandle, tmp_path: Path
):
    pids = tmp_path / "escaped.pids"
    daemon.write(
        "escape",
        f"""#!/bin/sh
setsid sh -c 'echo $$ >> {pids}; exec sleep 300' &
while [ ! -s {pids} ]; do sleep 0.01; done
echo "done"
""",
        mode=0o700,
    )
    c = daemon.client()
    eid = c.trigger("escape")["execution_id"]
    try:
        record = c.wait(eid, timeout=30)
        assert record["outcome"] == {
            "status": "completed",
            "result": {"exit_status": 0, "last_line": "done"},
        }
        wait_until(lambda: c.version()["running"] == 0, message="the slot to be free")
        assert claimed(c, eid) == 1  # its lease held while the pipe was drained
    finally:
        for pid in pids.read_text().split() if pids.exists() else []:
            os.kill(int(pid), 9)
