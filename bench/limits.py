"""Concurrency limits must not slow claims down: zero-step workflows/s through a real daemon,
without a limit and with `@ys.workflow(concurrency=1000)`, in one run.

    .venv/bin/python bench/limits.py [--quick] [--json] [--m 300] [--rounds 5] [--concurrency 4]

One daemon (bench/delivery.py's `Daemon`, in a home under bench/results/) with two scripts
that differ only in the limit: `zero` and `zero-limited`. Each round triggers M executions of
one, awaits them all, then the same for the other (the order alternates by round); the table
shows the median workflows/s of each; the verdict reads the median of each round's ratio (two
runs back to back drift less with the load than two medians). Target: within 5% (the limited claim
counts its slot group's leases through a partial index, one statement per claimed execution).
Then the same claim + acknowledge cycle straight on a SQLite store, as CPU time per cycle: the
figure to trust on a loaded machine, as it does not depend on who else has the cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from common import machine_info, progress, scratch_dir, table
from delivery import Daemon, _outcome, median

TARGET = 0.05  # at most 5% apart

SOURCES = {
    "zero.py": """
        import ys


        @ys.workflow
        def main(step, params):
            return None
    """,
    "zero-limited.py": """
        import ys


        @ys.workflow(concurrency=1000)
        def main(step, params):
            return None
    """,
}


def run_zero(c: Any, workflow: str, m: int) -> float:
    """Workflows/s of M executions of `workflow` triggered in a loop, then all awaited."""
    t0 = time.perf_counter()
    ids = [c.trigger(workflow)["execution_id"] for _ in range(m)]
    for eid in ids:
        _outcome(c.wait(eid, timeout=600))
    return m / (time.perf_counter() - t0)


def store_cycles(db: Path, limited: bool, n: int) -> float:
    """CPU seconds (every thread of this process) per claim + acknowledge of one zero-step
    execution, straight on a SQLite store: the claim's own cost, whoever else has the cores."""
    from ys.store.base import ScriptOptions
    from ys.store.sqlite import SqliteStore
    from ys.values import Outcome

    done = Outcome("completed")
    store = SqliteStore(db)
    try:
        # the limit recorded with the script, as a daemon does: every claim reads it there
        options = ScriptOptions(concurrency=1000) if limited else ScriptOptions()
        store.set_script("zero", "0" * 64, options=options, now=1_000_000.0)
        for _ in range(n):
            store.admit("zero", None, now=1_000_000.0)
        t0 = time.process_time()
        for _ in range(n):
            (d,) = store.claim_due(now=1_000_001.0, limit=1)
            store.acknowledge(d.execution_id, d.token, done, now=1_000_001.0)
        return (time.process_time() - t0) / n
    finally:
        store.close()


def measure_store(home: Path, n: int, rounds: int) -> dict[str, Any]:
    home.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[float]] = {"no_limit": [], "limit_1000": []}
    for i in range(rounds):
        for name in ("no_limit", "limit_1000") if i % 2 == 0 else ("limit_1000", "no_limit"):
            cpu = store_cycles(home / f"{name}-{i}.db", name == "limit_1000", n)
            runs[name].append(cpu)
            progress(f"store round {i + 1}/{rounds}: {name} {cpu * 1e6:.0f} µs CPU per cycle")
    free, limited = median(runs["no_limit"]), median(runs["limit_1000"])
    return {"n": n, "runs": runs, "no_limit_cpu": free, "limit_1000_cpu": limited}


def measure(home: Path, m: int, rounds: int, concurrency: int) -> dict[str, Any]:
    d = Daemon(home, concurrency)
    d.write_workflows(SOURCES)
    d.start(["zero", "zero-limited"])
    runs: dict[str, list[float]] = {"zero": [], "zero-limited": []}
    try:
        with d.client() as c:
            for name in runs:  # warm up: code caches, fork-ahead, the first claims
                run_zero(c, name, 20)
            for i in range(rounds):
                order = ["zero", "zero-limited"] if i % 2 == 0 else ["zero-limited", "zero"]
                for name in order:
                    runs[name].append(run_zero(c, name, m))
                    progress(f"round {i + 1}/{rounds}: {name} {runs[name][-1]:.0f}/s")
    finally:
        d.stop()
    free, limited = median(runs["zero"]), median(runs["zero-limited"])
    # Each round's two runs are back to back: their ratio drifts less with the machine's load
    # than the two medians do. The verdict reads the median of those ratios.
    paired = median([b / a for a, b in zip(runs["zero"], runs["zero-limited"], strict=True)])
    apart = abs(1.0 - paired)
    return {
        "m": m,
        "rounds": rounds,
        "concurrency": concurrency,
        "runs": runs,
        "no_limit_per_second": free,
        "limit_1000_per_second": limited,
        "limited_over_free_per_round": paired,
        "apart": apart,
        "pass": apart <= TARGET,
        "machine": machine_info(),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="M=100, 3 rounds")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--m", type=int, default=200, help="executions per round and workflow")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--concurrency", type=int, default=4, help="the daemon's --concurrency")
    p.add_argument(
        "--store-cycles",
        type=int,
        default=None,
        help="claim + acknowledge cycles per store round (2000; quick 300)",
    )
    p.add_argument("--keep", action="store_true", help="keep the daemon's home afterwards")
    a = p.parse_args()
    m, rounds = (100, 3) if a.quick else (a.m, a.rounds)
    with scratch_dir("limits", keep=a.keep) as home:
        res = measure(home / "home", m, rounds, a.concurrency)
        cycles = a.store_cycles or (300 if a.quick else 2000)
        res["store"] = measure_store(home / "store", cycles, rounds)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print(
        table(
            ["zero-step workflows/s", "median", "runs"],
            [
                ["no limit", f"{res['no_limit_per_second']:.0f}", _runs(res["runs"]["zero"])],
                [
                    "concurrency=1000",
                    f"{res['limit_1000_per_second']:.0f}",
                    _runs(res["runs"]["zero-limited"]),
                ],
            ],
        )
    )
    st = res["store"]
    print(
        f"claim + acknowledge on the store, CPU per cycle: no limit {st['no_limit_cpu'] * 1e6:.0f}"
        f" µs, concurrency=1000 {st['limit_1000_cpu'] * 1e6:.0f} µs "
        f"({(st['limit_1000_cpu'] / st['no_limit_cpu'] - 1) * 100:+.1f}%)"
    )
    verdict = "PASS" if res["pass"] else "FAIL"
    print(f"load average at start: {res['machine']['load_average_at_start']}")
    print(
        f"concurrency=1000 / no limit, median of the rounds' ratios: "
        f"{res['limited_over_free_per_round']:.3f}; apart {res['apart'] * 100:.1f}% "
        f"(target <= {TARGET * 100:.0f}%): {verdict}"
    )
    return 0


def _runs(xs: list[float]) -> str:
    return " ".join(f"{x:.0f}" for x in xs)


if __name__ == "__main__":
    sys.exit(main())
