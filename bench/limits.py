"""Concurrency limits must not slow claims down: zero-step workflows/s through a real daemon,
without a limit and with `@ys.workflow(concurrency=1000)`, in one run (issue 15).

    .venv/bin/python bench/limits.py [--quick] [--json] [--m 300] [--rounds 5] [--concurrency 4]

One daemon (bench/delivery.py's `Daemon`, in a home under bench/results/) with two scripts
that differ only in the limit: `zero` and `zero-limited`. Each round triggers M executions of
one, awaits them all, then the same for the other (the order alternates by round); the table
shows the median workflows/s of each; the verdict reads the median of each round's ratio (two
runs back to back drift less with the load than two medians). Target: within 5% (the limited claim
counts its slot group's leases through a partial index, one statement per claimed execution).
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
    p.add_argument("--keep", action="store_true", help="keep the daemon's home afterwards")
    a = p.parse_args()
    m, rounds = (100, 3) if a.quick else (a.m, a.rounds)
    with scratch_dir("limits", keep=a.keep) as home:
        res = measure(home / "home", m, rounds, a.concurrency)
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
