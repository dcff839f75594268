"""`ys backup` on a loaded database: how long it takes, and what it does to step latency.

    .venv/bin/python bench/keep.py [--executions N] [--seconds S] [--json]

Fills a SQLite store (group commit, as the daemon opens it) with N executions of 3 steps each,
then runs a load of step writes (admit, claim, 3 x save_step, acknowledge, in a loop on 4
threads) and records each save_step's latency: S seconds before the backup, then during
`SqliteStore.backup` (the daemon's `POST /v1/backup`: VACUUM INTO on its own read connection,
fsync, integrity_check). Reports the backup's time and the p50/p99 step latency before and
during. Durable as ys always is (WAL, synchronous=FULL). Small: --executions 200 --seconds 0.5.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from common import machine_info, progress, scratch_dir

from ys.store.sqlite import SqliteStore


def one_execution(store: SqliteStore, i: int, tag: str, latencies: list[float] | None) -> None:
    eid = f"{tag}-{i}"
    store.admit("bench", {"i": i}, execution_id=eid)
    deliveries = [d for d in store.claim_due(limit=10) if d.execution_id == eid]
    for d in deliveries:
        for k in range(3):
            t0 = time.perf_counter()
            store.save_step(
                d.execution_id, d.token, f"s{k}", kind="run", status="completed", value="1"
            )
            if latencies is not None:
                latencies.append(time.perf_counter() - t0)
        store.acknowledge(d.execution_id, d.token, {"status": "completed", "result": i})


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def load(store: SqliteStore, stop: threading.Event, latencies: list[float], tag: str) -> None:
    def loop(t: int) -> None:
        i = 0
        while not stop.is_set():
            one_execution(store, i, f"{tag}-{t}", latencies)
            i += 1

    threads = [threading.Thread(target=loop, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    stop.wait()
    for t in threads:
        t.join()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--executions", type=int, default=20_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with scratch_dir("keep") as root:
        store = SqliteStore(root / "ys.db", group_commit=True)
        progress(f"filling {args.executions} executions of 3 steps")
        t0 = time.perf_counter()
        for i in range(args.executions):
            one_execution(store, i, "fill", None)
        fill_s = time.perf_counter() - t0

        before: list[float] = []
        stop = threading.Event()
        th = threading.Thread(target=load, args=(store, stop, before, "before"))
        th.start()
        time.sleep(args.seconds)  # a measuring window, not synchronisation
        stop.set()
        th.join()

        during: list[float] = []
        stop = threading.Event()
        th = threading.Thread(target=load, args=(store, stop, during, "during"))
        th.start()
        result = store.backup(os.fspath(root / "backup.db"))
        stop.set()
        th.join()
        store.close()
        out: dict[str, Any] = {
            "executions": args.executions,
            "fill_seconds": round(fill_s, 2),
            "db_bytes": Path(root / "ys.db").stat().st_size,
            "backup_seconds": result["seconds"],
            "backup_bytes": result["bytes"],
            "step_ms_before": {
                "n": len(before),
                "p50": round(percentile(before, 50) * 1000, 2),
                "p99": round(percentile(before, 99) * 1000, 2),
            },
            "step_ms_during": {
                "n": len(during),
                "p50": round(percentile(during, 50) * 1000, 2),
                "p99": round(percentile(during, 99) * 1000, 2),
            },
            "machine": machine_info(),
        }
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        b, d = out["step_ms_before"], out["step_ms_during"]
        print(
            f"{out['executions']} executions, {out['db_bytes']} bytes: backup took "
            f"{out['backup_seconds']} s; save_step p50/p99 {b['p50']}/{b['p99']} ms before, "
            f"{d['p50']}/{d['p99']} ms during"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
