"""Steps of many executions at once: E executions of K steps each on a daemon whose
concurrency is E, next to the raw single-commit ceiling of the same disk in the same round.

Run by bench/delivery.py (its "steps/s, 16 executions x 50 steps" row). Each round measures
the raw ceiling for 1 s (bench/store.py's RawCommits: one small INSERT per commit, WAL,
synchronous=FULL), then triggers the E executions and waits for every outcome; steps/s is
E x K over first trigger -> last outcome, so it includes each delivery's start. Steps of
different executions share commits in the group writer; each step is still committed before
it returns to its workflow.

Target: steps/s >= 1.5x the raw ceiling.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from store import RawCommits

TARGET = 1.5


def raw_rate(path: Path, seconds: float = 1.0) -> float:
    raw = RawCommits(path)
    try:
        return raw.run(seconds).rate
    finally:
        raw.close()


def measure(
    daemon_cls: Any, sources: Any, scratch: Path, executions: int, k: int, rounds: int
) -> dict[str, Any]:
    home = scratch / f"ys-par{executions}"
    d = daemon_cls(home, executions)
    d.write_workflows(sources(home / "first-line.marks"))
    runs: list[dict[str, float]] = []
    try:
        d.start(["steps"])
        with d.client() as c:
            c.wait(c.trigger("steps", params={"k": 2})["execution_id"], timeout=120)  # warm-up
            for r in range(rounds):
                raw = raw_rate(scratch / f"raw-par-{r}.db")
                t0 = time.perf_counter()
                ids = [
                    c.trigger("steps", params={"k": k})["execution_id"] for _ in range(executions)
                ]
                for eid in ids:
                    rec = c.wait(eid, timeout=600)
                    if rec["status"] != "completed":
                        raise RuntimeError(f"{eid} ended {rec['status']}")
                seconds = time.perf_counter() - t0
                rate = executions * k / seconds
                runs.append(
                    {
                        "steps_per_second": rate,
                        "raw_commits_per_second": raw,
                        "ratio": rate / raw if raw > 0 else 0.0,
                    }
                )
    finally:
        d.stop()
    ratios = sorted(x["ratio"] for x in runs)
    rates = sorted(x["steps_per_second"] for x in runs)
    raws = sorted(x["raw_commits_per_second"] for x in runs)
    mid = len(runs) // 2
    return {
        "executions": executions,
        "k": k,
        "runs": runs,
        "steps_per_second": rates[mid],
        "raw_commits_per_second": raws[mid],
        "ratio": ratios[mid],
        "pass": ratios[mid] >= TARGET,
    }
