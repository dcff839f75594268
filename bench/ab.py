"""Before/after in one run: ys daemons from two (or more) source trees, interleaved round by
round, on the same disk at the same moment.

    .venv/bin/python bench/ab.py BEFORE_TREE [AFTER_TREE] [--rounds 3] [--k 500] [--n 30]
                                 [--m 20] [--postgres | --both] [--json]

A tree is a folder holding a `ys` package (a checkout, or `cp -r` of one); AFTER_TREE defaults
to this repository. Each daemon runs `python -m ys.daemon` with that tree as its working
directory and first on PYTHONPATH, so the daemon, its fork server and its workers are all
that tree's code; the driver (ys.Client) is this repository's for all of them. Per tree:

  steps/s       one execution of K step.run calls, timed inside the workflow
  CPU/step      CPU of the daemon (every thread) and of the worker, per step, from /proc and
                time.process_time(): what the step path costs, whatever the load; on
                PostgreSQL also the server's (every server process, the other daemons' idle
                sessions included)
  first line    trigger -> first statement of the workflow, N samples, p50 and p99
  zero/s        M (`--m`, 20) zero-step workflows triggered then awaited, per round; and the daemon's CPU
                per execution over all rounds (admission, claim, launch, outcome), alone and
                with its fork server and workers (the daemon's process tree)

On SQLite by default (each daemon its own file in its own home); `--postgres` gives each
daemon a fresh database of its own on one throw-away PostgreSQL server (fsync on, under
bench/results/; or YS_BENCH_POSTGRES_URL's server), `--both` measures SQLite and then
PostgreSQL in one command. The machine is shared and noisy: read the figures of one run against each other, never
across runs, and look at the load printed beside them.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import textwrap
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import delivery as D
from common import (
    REPO_ROOT,
    postgres_databases,
    postmaster_pids,
    progress,
    scratch_dir,
    tree_cpu_seconds,
)

CPU_STEPS = """
    import time
    import ys

    def _one(i):
        return i + 1

    @ys.workflow
    def main(step, params):
        c0 = time.process_time()
        t0 = time.time()
        for i in range(params["k"]):
            step.run(f"s{i}", _one, i)
        return {"cpu": time.process_time() - c0, "wall": time.time() - t0}
"""


def cpu_of(pid: int) -> float:
    """User + system seconds of every thread of `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(scratch: Path) -> float:
    """CPU seconds used so far by the throw-away PostgreSQL server under `scratch` (every
    server process)."""
    return tree_cpu_seconds(postmaster_pids(scratch))


def start(tree: Path, home: Path, database: str | None) -> tuple[D.Daemon, D.YsSide]:
    """A daemon running `tree`'s code in `home`: on `database` (a PostgreSQL URL, through
    YS_DATABASE), or on its own SQLite file when None."""
    d = D.Daemon(home, 4)
    d.env["PYTHONPATH"] = str(tree)
    d.env.pop("YS_DATABASE", None)
    if database is not None:
        d.env["YS_DATABASE"] = database
    sources = D.workflow_sources(home / "marks")
    sources["cpu-steps.py"] = textwrap.dedent(CPU_STEPS)
    d.write_workflows(sources)
    D.REPO_ROOT = tree  # Daemon.start runs `python -m ys.daemon` from there
    try:
        d.start(["first-line", "zero", "cpu-steps"])
    finally:
        D.REPO_ROOT = REPO_ROOT
    return d, D.YsSide(d, home / "marks")


def steps_round(
    d: D.Daemon, y: D.YsSide, k: int, server: Callable[[], float] | None = None
) -> dict[str, float]:
    """One execution of `k` steps; `server`: the database server's CPU seconds so far."""
    assert d.proc is not None
    c0 = cpu_of(d.proc.pid)
    s0 = server() if server else 0.0
    eid = y.c.trigger("cpu-steps", params={"k": k})["execution_id"]
    out = D._outcome(y.c.wait(eid, timeout=600))
    daemon_cpu = cpu_of(d.proc.pid) - c0
    row = {
        "per_second": k / out["wall"],
        "daemon_us": daemon_cpu / k * 1e6,
        "worker_us": out["cpu"] / k * 1e6,
    }
    if server:
        row["server_us"] = (server() - s0) / k * 1e6
    return row


def zero_round(
    d: D.Daemon,
    y: D.YsSide,
    daemon_us: list[float],
    m: int = 20,
    tree_us: list[float] | None = None,
) -> float:
    """Zero-step workflows/s over `m`; the daemon's CPU per execution goes to `daemon_us`,
    its process tree's (the fork server and every worker too) to `tree_us`."""
    assert d.proc is not None
    c0, t0 = cpu_of(d.proc.pid), tree_cpu_seconds([d.proc.pid])
    per_second: float = y.zero(m)["per_second"]
    daemon_us.append((cpu_of(d.proc.pid) - c0) / m * 1e6)  # in clock ticks: 500 us apart
    if tree_us is not None:
        tree_us.append((tree_cpu_seconds([d.proc.pid]) - t0) / m * 1e6)
    return per_second


def measure(
    trees: list[Path],
    root: Path,
    database: Callable[[], str | None],
    rounds: int,
    k: int,
    n: int,
    m: int = 20,
    server: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """One daemon per tree (homes under `root`, each on `database()`), warmed up, then
    `rounds` rounds of every measurement on every daemon, the order rotating each round;
    `server`: the database server's CPU seconds so far (PostgreSQL)."""
    load_before = os.getloadavg()
    sides = []
    try:
        for i, tree in enumerate(trees):
            progress(f"starting a daemon from {tree}")
            label = f"{tree} ({i + 1})" if tree in trees[:i] else str(tree)  # the same tree twice
            sides.append((label, *start(tree, root / f"h{i}", database())))
        for _, _, y in sides:
            y.warm_up()
        res: dict[str, dict[str, Any]] = {
            t: {"steps": [], "first": [], "zero": [], "zero_daemon_us": [], "zero_tree_us": []}
            for t, _, _ in sides
        }
        for r in range(rounds):
            progress(f"round {r + 1} of {rounds}")
            for t, d, y in D.rotate(sides, r):
                res[t]["steps"].append(steps_round(d, y, k, server))
                res[t]["first"] += y.first(max(1, n // rounds))["samples"]
                res[t]["zero"].append(
                    zero_round(d, y, res[t]["zero_daemon_us"], m, res[t]["zero_tree_us"])
                )
    finally:
        for _, d, y in sides:
            y.close()
            d.stop()
    return {"load_before": load_before, "load_after": os.getloadavg(), "trees": res}


def report(adapter: str, m: dict[str, Any]) -> str:
    load = [", ".join(f"{x:.2f}" for x in m[k]) for k in ("load_before", "load_after")]
    lines = [
        f"ys A/B on {adapter}, interleaved; load average before {load[0]}, after {load[1]}"
        " (2 cores: above 2 is noisy)"
    ]
    for t, r in m["trees"].items():
        st = r["steps"]
        rounds = " ".join(f"{s['per_second']:,.0f}" for s in st)
        zeros = " ".join(f"{z:,.0f}" for z in r["zero"])
        lines.append(
            f"{t}\n  steps/s {D.median([s['per_second'] for s in st]):,.0f} "
            f"(rounds {rounds}); CPU/step: daemon "
            f"{D.median([s['daemon_us'] for s in st]):.0f} us, worker "
            f"{D.median([s['worker_us'] for s in st]):.0f} us"
            + (
                f", server {D.median([s['server_us'] for s in st]):.0f} us"
                if st and "server_us" in st[0]
                else ""
            )
            + "\n"
            f"  first line p50 {D.percentile(r['first'], 50) * 1000:.1f} ms, "
            f"p99 {D.percentile(r['first'], 99) * 1000:.1f} ms ({len(r['first'])} samples); "
            f"zero-step/s {D.median(r['zero']):,.0f} "
            f"(rounds {zeros}), daemon CPU {sum(r['zero_daemon_us']) / len(r['zero']):.0f} us each"
            f", with its fork server and workers {sum(r['zero_tree_us']) / len(r['zero']):.0f} us"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("trees", nargs="+", help="BEFORE [AFTER]: folders holding a ys package")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=500, help="steps per execution")
    ap.add_argument("--n", type=int, default=30, help="first-line samples per tree")
    ap.add_argument("--m", type=int, default=20, help="zero-step workflows per round")
    where = ap.add_mutually_exclusive_group()
    where.add_argument(
        "--postgres", action="store_true", help="on PostgreSQL (a fresh database per daemon)"
    )
    where.add_argument("--both", action="store_true", help="on SQLite, then on PostgreSQL")
    ap.add_argument("--json", action="store_true", help="one JSON document: every round's figures")
    args = ap.parse_args()
    trees = [Path(t).resolve() for t in args.trees]
    if len(trees) == 1:
        trees.append(REPO_ROOT)
    adapters = (
        ["sqlite", "postgresql"] if args.both else ["postgresql" if args.postgres else "sqlite"]
    )
    D.compile_project()
    for tree in trees:  # every tree's code starts from byte code, as this checkout's does
        D._run([sys.executable, "-m", "compileall", "-q", "-j", "0", str(tree / "ys")])
    out: dict[str, Any] = {}
    with scratch_dir("ab") as scratch, ExitStack() as stack:
        for adapter in adapters:
            database: Callable[[], str | None] = lambda: None  # noqa: E731
            server: Callable[[], float] | None = None
            if adapter == "postgresql":
                database = stack.enter_context(postgres_databases(scratch)).create
                if not os.environ.get("YS_BENCH_POSTGRES_URL"):  # the server started here
                    server = functools.partial(server_cpu, scratch)
            (scratch / adapter).mkdir()
            progress(f"on {adapter}")
            out[adapter] = measure(
                trees, scratch / adapter, database, args.rounds, args.k, args.n, args.m, server
            )
            if not args.json:
                print(report(adapter, out[adapter]), flush=True)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
