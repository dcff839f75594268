"""An idle daemon: how often it wakes and how much memory it holds, fork server included.

    .venv/bin/python bench/idle.py [--seconds 10] [--json]

Starts a real daemon (`python -m ys.daemon run`) in a scratch home under bench/results/ with
one workflow script, lets it settle (the fork server up, the first scan done), then counts the
context switches (voluntary + involuntary, every thread) of the daemon and of each process it
started over `--seconds`, from /proc. A thread that sleeps in a poll and wakes up switches
once per wake-up, so switches/s is the wake-up rate. Memory is read at the end, summed over the
daemon and its children (the fork server and the spare child it forks ahead): PSS, which
shares each page among the processes that map it (forked children share most of theirs, and
their RSS sums would count those pages twice), and RSS beside it.

Targets: at most 2 wake-ups/s and at most 60 MB, fork server included (PSS).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from common import machine_info, progress, scratch_dir
from delivery import Daemon

WAKEUPS_TARGET = 2.0
RSS_TARGET_MB = 60.0


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def tree(pid: int) -> list[int]:
    pids = [pid]
    for c in children(pid):
        pids += tree(c)
    return pids


def switches(pid: int) -> int:
    """Context switches of every thread of `pid` so far."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def cmdline(pid: int) -> str:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return raw.strip()[:80]


def measure(scratch: Path, seconds: float) -> dict[str, Any]:
    d = Daemon(scratch / "home", 4)
    d.write_workflows(
        {"hello.py": "import ys\n\n@ys.workflow\ndef main(step, params):\n    return None\n"}
    )
    try:
        d.start(["hello"])
        assert d.proc is not None
        with d.client() as c:  # one delivery, so that whatever a first delivery starts is up
            eid = c.trigger("hello")["execution_id"]
            c.wait(eid, timeout=60)
        time.sleep(3.0)  # settle: the last answers sent, the watcher's first round done
        pids = tree(d.proc.pid)
        before = {p: switches(p) for p in pids}
        t0 = time.monotonic()
        time.sleep(seconds)
        took = time.monotonic() - t0
        after = {p: switches(p) for p in pids}
        procs = [
            {
                "pid": p,
                "cmd": cmdline(p),
                "wakeups_per_second": (after[p] - before[p]) / took,
                "rss_mb": rss_kb(p) / 1024,
                "pss_mb": pss_kb(p) / 1024,
            }
            for p in pids
        ]
    finally:
        d.stop()
    return {
        "seconds": took,
        "processes": procs,
        "wakeups_per_second": sum(p["wakeups_per_second"] for p in procs),
        "rss_mb": sum(p["rss_mb"] for p in procs),
        "pss_mb": sum(p["pss_mb"] for p in procs),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    load_before = os.getloadavg()
    with scratch_dir("idle") as scratch:
        progress(f"idle daemon for {args.seconds:g} s in {scratch}")
        res = measure(scratch, args.seconds)
    res["load"] = {"before": load_before, "after": os.getloadavg()}
    res["machine"] = machine_info()
    res["targets"] = {"wakeups_per_second": WAKEUPS_TARGET, "rss_mb": RSS_TARGET_MB}
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(
        f"idle daemon over {res['seconds']:.1f} s; load average before "
        f"{', '.join(f'{x:.2f}' for x in load_before)}, after "
        f"{', '.join(f'{x:.2f}' for x in res['load']['after'])}"
    )
    for p in res["processes"]:
        print(
            f"  pid {p['pid']:>7}  {p['wakeups_per_second']:6.1f} wake-ups/s  "
            f"PSS {p['pss_mb']:5.1f} MB  RSS {p['rss_mb']:5.1f} MB  {p['cmd']}"
        )
    w, r = res["wakeups_per_second"], res["pss_mb"]
    print(
        f"wake-ups/s <= {WAKEUPS_TARGET:g}: {'PASS' if w <= WAKEUPS_TARGET else 'FAIL'} ({w:.1f})"
    )
    print(
        f"memory <= {RSS_TARGET_MB:g} MB (PSS, daemon + children): "
        f"{'PASS' if r <= RSS_TARGET_MB else 'FAIL'} ({r:.1f} MB; RSS summed "
        f"{res['rss_mb']:.1f} MB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
