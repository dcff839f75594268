"""Scale-out on PostgreSQL: one database, then 1, 2 and 3 daemons (separate homes on this box).

    .venv/bin/python bench/scaleout.py [--executions 600] [--step-ms 20] [--concurrency 8]
                                       [--daemons 1,2,3] [--steps 500] [--admissions 500] [--json]

  scale-out    E executions of a 3-step workflow whose steps each wait `--step-ms` in their
               bodies, triggered over the daemons in turn, every daemon `--concurrency C`;
               executions/s from the first trigger to the last outcome, and the check that no
               execution was delivered twice (one `claimed` event each) or completed twice
  steps        durable steps/s inside one execution of `--steps` no-op steps, on PostgreSQL
               and on SQLite, in the same run
  admissions   `--admissions` triggers from 16 threads through one daemon's socket, per store

  CPU/exec     the CPU every process used over the scale-out run (the daemons, their workers,
               the PostgreSQL server, this client), per execution

Targets: executions/s with 2 daemons >= 1.9x one daemon, with 3 >= 2.7x (with
`--step-ms 200`: steps that wait, as work on other machines would); CPU per execution with
3 daemons <= 1.15x one daemon's.
The server is a throw-away one (tests/pg_support.PgServer) with fsync on, in bench/results/,
or YS_BENCH_POSTGRES_URL's (its user must be allowed to CREATE DATABASE).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (  # noqa: E402
    load_average,
    postgres_databases,
    postmaster_pids,
    progress,
    scratch_dir,
    table,
    tree_cpu_seconds,
)
from tests.support import DaemonHandle, make_home  # noqa: E402

THREE_STEPS = """
import time
import ys

def work(ms):
    time.sleep(ms / 1000)
    return ms

@ys.workflow
def main(step, params):
    for name in ("one", "two", "three"):
        step.run(name, work, params["ms"])
    return params["i"]
"""

MANY_STEPS = """
import time
import ys

@ys.workflow
def main(step, params):
    started = time.time()
    for i in range(params["n"]):
        step.run(f"s{i}", int, i)
    return {"seconds": time.time() - started}
"""

NOOP = """
import ys

@ys.workflow
def main(step, params):
    return 1
"""

ENV = {"YS_LEASE_SECONDS": "30"}
SPEED_TARGETS = {2: 1.9, 3: 2.7}  # executions/s over one daemon's (the targets above)
CPU_TARGET = 1.15  # CPU per execution with 3 daemons over one daemon's


def homes(root: Path, n: int, url: str | None) -> list[DaemonHandle]:
    out = []
    for i in range(n):
        (root / f"box{i}").mkdir()
        extra = dict(ENV, YS_DATABASE=url) if url else dict(ENV)
        h = make_home(root / f"box{i}", **extra)
        h.env["YS_LOG_LEVEL"] = "WARNING"
        out.append(h)
    return out


def scale_out(
    root: Path, url: str, n: int, executions: int, step_ms: int, concurrency: int
) -> dict[str, Any]:
    hs = homes(root, n, url)
    try:
        for h in hs:
            h.write("three.py", THREE_STEPS)
            h.start(concurrency=concurrency)
        clients = [h.client(timeout=60) for h in hs]
        ids = [f"x{i:05}" for i in range(executions)]

        def trigger(i: int) -> None:
            with hs[i % n].client(timeout=60) as c:  # a client per thread: they are not shared
                c.trigger("three", {"ms": step_ms, "i": i}, execution_id=ids[i])

        cpu_roots = [os.getpid(), *postmaster_pids(root.parent)]
        cpu = tree_cpu_seconds(cpu_roots)
        started = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(trigger, range(executions)))
        for execution_id in ids:
            clients[0].wait(execution_id, timeout=600)
        seconds = time.monotonic() - started
        cpu = tree_cpu_seconds(cpu_roots) - cpu
        claims: Counter[str] = Counter()
        ends: Counter[str] = Counter()
        for execution_id in ids:
            kinds = [e["kind"] for e in clients[0].history(execution_id, limit=1000)["events"]]
            claims[execution_id] = kinds.count("claimed")
            ends[execution_id] = sum(kinds.count(k) for k in ("completed", "failed", "cancelled"))
        for c in clients:
            c.close()
        return {
            "daemons": n,
            "executions": executions,
            "seconds": round(seconds, 3),
            "executions_per_s": round(executions / seconds, 1),
            "cpu_ms_per_execution": round(cpu * 1000 / executions, 2),
            "delivered_twice": sum(1 for v in claims.values() if v != 1),
            "ended_twice": sum(1 for v in ends.values() if v != 1),
        }
    finally:
        for h in hs:
            h.stop()


def steps_and_admissions(
    root: Path, url: str | None, steps: int, admissions: int
) -> dict[str, Any]:
    (h,) = homes(root, 1, url)
    try:
        h.write("many.py", MANY_STEPS)
        h.write("noop.py", NOOP)
        h.start(concurrency=8)
        with h.client(timeout=600) as c:
            c.trigger("many", {"n": steps}, execution_id="many")
            inside = c.wait("many", timeout=600)["outcome"]["result"]["seconds"]
        started = time.monotonic()
        with ThreadPoolExecutor(16) as pool:

            def admit(i: int) -> None:
                with h.client(timeout=60) as c:
                    c.trigger("noop", {"i": i}, execution_id=f"a{i:05}")

            list(pool.map(admit, range(admissions)))
        admitted = time.monotonic() - started
        return {
            "store": "postgresql" if url else "sqlite",
            "steps_per_s": round(steps / inside, 1),
            "admissions_per_s": round(admissions / admitted, 1),
        }
    finally:
        h.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--executions", type=int, default=600)
    ap.add_argument("--step-ms", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--daemons", default="1,2,3")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--admissions", type=int, default=500)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    counts = [int(x) for x in args.daemons.split(",")]
    load_start = load_average()
    with scratch_dir("scaleout", keep=args.keep) as root, postgres_databases(root) as dbs:
        rows = []
        for n in counts:
            progress(f"scale-out: {n} daemon(s), {args.executions} executions")
            (root / f"scale{n}").mkdir()
            rows.append(
                scale_out(
                    root / f"scale{n}",
                    dbs.create(),
                    n,
                    args.executions,
                    args.step_ms,
                    args.concurrency,
                )
            )
        base = rows[0]["executions_per_s"]
        base_cpu = rows[0]["cpu_ms_per_execution"]
        for r in rows:
            r["vs_one"] = round(r["executions_per_s"] / base, 2)
            r["cpu_vs_one"] = round(r["cpu_ms_per_execution"] / base_cpu, 2) if base_cpu else 0.0
        side = []
        for name, target in (("postgresql", dbs.create()), ("sqlite", None)):
            progress(f"steps and admissions: {name}")
            (root / f"side-{name}").mkdir()
            side.append(
                steps_and_admissions(root / f"side-{name}", target, args.steps, args.admissions)
            )
    report = {"scale_out": rows, "stores": side, "load_average": [load_start, load_average()]}
    if args.json:
        print(json.dumps(report))
        return 0
    print(
        table(
            ["daemons", "executions", "seconds", "exec/s", "vs 1", "CPU ms/exec", "vs 1", "twice"],
            [
                [
                    str(r["daemons"]),
                    str(r["executions"]),
                    str(r["seconds"]),
                    str(r["executions_per_s"]),
                    f"{r['vs_one']}x",
                    str(r["cpu_ms_per_execution"]),
                    f"{r['cpu_vs_one']}x",
                    str(r["delivered_twice"] + r["ended_twice"]),
                ]
                for r in rows
            ],
        )
    )
    print()
    print(
        table(
            ["store", "steps/s (one execution)", "admissions/s (socket)"],
            [[s["store"], str(s["steps_per_s"]), str(s["admissions_per_s"])] for s in side],
        )
    )
    for r in rows[1:]:
        goal = SPEED_TARGETS.get(r["daemons"])
        if goal is not None:
            ok = "PASS" if r["vs_one"] >= goal else "FAIL"
            print(f"{r['daemons']} daemons >= {goal}x one daemon's executions/s: {ok}")
        if r["daemons"] == 3:
            ok = "PASS" if r["cpu_vs_one"] <= CPU_TARGET else "FAIL"
            print(f"CPU per execution with 3 daemons <= {CPU_TARGET}x one daemon's: {ok}")
    print(f"\nload average: {load_start} -> {load_average()} (2 cores: rerun if well above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
