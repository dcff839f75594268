"""Admissions through a real daemon's socket, next to the raw SQLite commit ceiling of the disk.

    .venv/bin/python bench/triggers.py [--seconds N] [--processes P] [--threads K] [--json]

P client processes (default 4) each run K threads (default 4), each thread with its own
ys.Client calling trigger("park", {"n": i}) in a loop for N seconds (default 5): admissions/s
as a user's concurrent `ys trigger` calls see them (HTTP over the Unix socket, the daemon's
event loop, the group writer, WAL + synchronous=FULL, each answered after its commit). The
daemon runs as usual (concurrency 4): every admitted execution is delivered once (a forked
worker runs `park`, which sleeps for a day), so deliveries share the machine with the
admissions, as they would. The raw ceiling (bench/store.py's, one INSERT per commit) is
measured right before and after on the same disk; the ratio uses their mean.

A second row, "alone", triggers `hold` instead: a workflow declared `concurrency=1` whose one
delivery blocks, so every other execution waits for its slot and no delivery competes with
the admissions for the two cores. The first row depends on how fast ys delivers (faster
deliveries take more of the CPU in the same seconds); the second is the admission path's own
capacity.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

from common import fmt_rate, fmt_ratio, machine_info, progress, scratch_dir
from delivery import Daemon, compile_project
from store import RawCommits

PARK = """
import ys

@ys.workflow
def main(step, params):
    step.sleep("park", 86400)
"""


HOLD = """
import time
import ys

@ys.workflow(concurrency=1)
def main(step, params):
    time.sleep(86400)  # holds the only slot: the other executions wait, never delivered
"""


def client_process(
    socket: str, threads: int, start_at: float, seconds: float, out: Any, workflow: str = "park"
) -> None:
    from ys.client import Client

    counts = [0] * threads

    def run(t: int) -> None:
        with Client(socket, timeout=60) as c:
            while time.time() < start_at:
                time.sleep(0.001)
            deadline = start_at + seconds
            n = 0
            while time.time() < deadline:
                c.trigger(workflow, {"n": n, "t": t})
                n += 1
            counts[t] = n

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    out.put(sum(counts))


def raw_ceiling(scratch: Path, tag: str, seconds: float) -> float:
    raw = RawCommits(scratch / f"raw-{tag}.db")
    try:
        return raw.run(seconds).rate
    finally:
        raw.close()


def run(seconds: float, processes: int, threads: int, raw_seconds: float = 1.5) -> dict[str, Any]:
    compile_project()
    rows = {}
    for workflow in ("park", "hold"):
        rows[workflow] = run_one(seconds, processes, threads, workflow, raw_seconds)
    doc = rows["park"]
    doc["alone"] = rows["hold"]
    return doc


def run_one(
    seconds: float, processes: int, threads: int, workflow: str, raw_seconds: float
) -> dict[str, Any]:
    with scratch_dir("triggers") as scratch:
        daemon = Daemon(scratch / "home", concurrency=4)
        # its stop is not measured: the held deliveries get 1 s to stop, not the default grace
        daemon.env["YS_GRACE_SECONDS"] = "1"
        daemon.write_workflows({"park.py": PARK, "hold.py": HOLD})
        progress("raw ceiling (before) ...")
        before = raw_ceiling(scratch, "before", raw_seconds)
        daemon.start(["park", "hold"])
        try:
            progress(f"{processes} x {threads} clients triggering {workflow} for {seconds:g} s ...")
            ctx = multiprocessing.get_context("fork")
            out = ctx.Queue()
            start_at = time.time() + 1.0
            procs = [
                ctx.Process(
                    target=client_process,
                    args=(str(daemon.socket), threads, start_at, seconds, out, workflow),
                )
                for _ in range(processes)
            ]
            for p in procs:
                p.start()
            total = sum(out.get(timeout=seconds + 120) for _ in procs)
            for p in procs:
                p.join(30)
        finally:
            daemon.stop()
        conn = sqlite3.connect(daemon.db)
        try:  # every answered trigger is a stored execution, once
            stored = conn.execute("SELECT count(*) FROM executions").fetchone()[0]
            delivered = conn.execute(
                "SELECT count(*) FROM events WHERE kind = 'claimed'"
            ).fetchone()[0]
        finally:
            conn.close()
        progress("raw ceiling (after) ...")
        after = raw_ceiling(scratch, "after", raw_seconds)
    rate = total / seconds
    raw = (before + after) / 2
    return {
        "bench": "triggers",
        "command": "python bench/triggers.py " + " ".join(sys.argv[1:]),
        "machine": machine_info(),
        "clients": {"processes": processes, "threads_each": threads},
        "seconds": seconds,
        "admissions": total,
        "admissions_per_s": rate,
        "raw_commits_per_s": {"before": before, "after": after, "mean": raw},
        "ratio_to_raw": rate / raw if raw else 0.0,
        "stored_executions": stored,
        "deliveries": delivered,
    }


def render(doc: dict[str, Any]) -> str:
    m, c, r = doc["machine"], doc["clients"], doc["raw_commits_per_s"]
    return "\n".join(
        [
            "ys triggers bench: admissions through the daemon's socket (WAL, synchronous=FULL)",
            f"  python {m['python']}, sqlite {m['sqlite']}, {m['cpus']} cpus; "
            f"load at start {m['load_average_at_start']}",
            f"  {c['processes']} client processes x {c['threads_each']} threads, "
            f"{doc['seconds']:g} s; daemon concurrency 4 (each execution delivered once)",
            "",
            f"raw SQLite commit ceiling: {fmt_rate(r['mean'])} commits/s "
            f"(before {fmt_rate(r['before'])}, after {fmt_rate(r['after'])})",
            f"admissions/s through the socket: {fmt_rate(doc['admissions_per_s'])} "
            f"({fmt_ratio(doc['ratio_to_raw'])} raw; {doc['admissions']} answered, "
            f"{doc['stored_executions']} stored; {doc['deliveries']} deliveries meanwhile)",
            f"admissions/s alone (no delivery competing): "
            f"{fmt_rate(doc['alone']['admissions_per_s'])} "
            f"({fmt_ratio(doc['alone']['ratio_to_raw'])} raw of "
            f"{fmt_rate(doc['alone']['raw_commits_per_s']['mean'])}; "
            f"{doc['alone']['admissions']} answered, "
            f"{doc['alone']['stored_executions']} stored)",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=5.0, help="seconds of triggering (5)")
    p.add_argument("--processes", type=int, default=4, help="client processes (4)")
    p.add_argument("--threads", type=int, default=4, help="threads per client process (4)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead")
    p.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 0.2 s of triggering by one client, 0.2 s raw ceilings",
    )
    args = p.parse_args(argv)
    raw_seconds = 1.5
    if args.quick:
        args.seconds, args.processes, args.threads, raw_seconds = 0.2, 1, 1, 0.2
    if args.seconds <= 0 or args.processes < 1 or args.threads < 1:
        p.error("--seconds must be > 0, --processes and --threads >= 1")
    doc = run(args.seconds, args.processes, args.threads, raw_seconds)
    print(json.dumps(doc, indent=2) if args.json else render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
