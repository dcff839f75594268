"""GET /v1/metrics with many executions: the time one scrape takes through the daemon's socket
(target: <= 10 ms with 100,000 executions), and the database read behind it alone, beside
what a full scan (GROUP BY over executions) would cost on the same file.

    .venv/bin/python bench/metrics.py [--executions N] [--runs R] [--json] [--keep]

The database is filled in one transaction (admission rows as the store writes them, 20
workflows; 90% completed, 5% failed, 5% due), then a daemon is started on it with no scripts,
so nothing runs while the route is timed. Each scrape is timed from the client's side
(ys.client.Client.metrics(), one connection kept open, as a Prometheus proxy would).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import common

PY = sys.executable
TARGET_MS = 10.0


def fill(db: Path, n: int) -> None:
    from ys.store.sqlite import SqliteStore
    from ys.store.sqlite.admissions import admission_inserts

    store = SqliteStore(db)
    now = time.time() - 3600
    rows: dict[str, list[tuple[object, ...]]] = {}
    for i in range(n):
        for sql, values in admission_inserts(
            f"e-{i:07d}", f"wf-{i % 20}", '{"n":1}', "{}", None, now + i * 0.001
        ):
            rows.setdefault(sql, []).append(values)

    def tx(c: sqlite3.Connection) -> None:
        for sql, values in rows.items():
            c.executemany(sql, values)
        # most of them ended long ago; the triggers keep the counts as they change
        c.execute(
            "UPDATE executions SET status='completed', due_at=NULL "
            "WHERE CAST(substr(execution_id, 3) AS INTEGER) % 20 < 18"
        )
        c.execute(
            "UPDATE executions SET status='failed', due_at=NULL "
            "WHERE CAST(substr(execution_id, 3) AS INTEGER) % 20 = 18"
        )

    store.core.write(tx)
    store.close()


def time_reads(db: Path, runs: int) -> dict[str, float]:
    from ys.store.sql.observing import shared_counts
    from ys.store.sqlite.dialect import Connection

    conn = sqlite3.connect(db, isolation_level=None, factory=Connection)
    counts, scan = [], []
    for _ in range(runs):
        t = time.perf_counter()
        shared_counts(conn, time.time())
        counts.append(time.perf_counter() - t)
        t = time.perf_counter()
        conn.execute(
            "SELECT workflow, status, COUNT(*) FROM executions GROUP BY workflow, status"
        ).fetchall()
        scan.append(time.perf_counter() - t)
    conn.close()
    return {
        "counts_read_ms": statistics.median(counts) * 1000,
        "full_scan_ms": statistics.median(scan) * 1000,
    }


def time_route(home: Path, runs: int) -> dict[str, float]:
    from ys.client import Client

    env = dict(
        os.environ, YS_HOME=str(home), YS_WORKFLOWS=str(home / "workflows"), YS_AUTOSTART="0"
    )
    (home / "workflows").mkdir(mode=0o700, exist_ok=True)
    log = open(home / "daemon.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [PY, "-m", "ys.daemon", "run"],
        env=env,
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    try:
        client = Client(str(home / "run" / "ys.sock"), timeout=30)
        deadline = time.monotonic() + 60
        while True:
            try:
                client.version()
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        "the daemon did not start: " + (home / "daemon.log").read_text()[-2000:]
                    ) from None
                time.sleep(0.05)
        text = client.metrics()
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            client.metrics()
            times.append(time.perf_counter() - t)
        client.close()
        times.sort()
        return {
            "route_median_ms": statistics.median(times) * 1000,
            "route_p95_ms": times[int(len(times) * 0.95) - 1] * 1000,
            "bytes": float(len(text)),
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--executions", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    with common.scratch_dir("metrics", keep=args.keep) as home:
        os.chmod(home, 0o700)
        db = home / "ys.db"
        common.progress(f"filling {db} with {args.executions} executions")
        fill(db, args.executions)
        os.chmod(db, 0o600)
        load = common.load_average()
        out: dict[str, object] = {
            "executions": args.executions,
            "runs": args.runs,
            "load_average": load,
        }
        out.update(time_reads(db, max(20, args.runs // 10)))
        out.update(time_route(home, args.runs))
        out["target_ms"] = TARGET_MS
        out["load_average_end"] = common.load_average()
    if args.json:
        print(json.dumps(out))
        return 0
    rows = [[k, f"{v:.2f}" if isinstance(v, float) else str(v)] for k, v in out.items()]
    print(common.table(["measure", "value"], rows, right={1}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
