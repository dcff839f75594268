"""`ys backup` on a loaded database (its time, what it does to step latency); `ys export` and
`ys import` of many executions (their time and peak memory).

    .venv/bin/python bench/keep.py [--executions N] [--seconds S] [--json]
    .venv/bin/python bench/keep.py --transfer [--executions N] [--json]

Fills a SQLite store (group commit, as the daemon opens it) with N executions of 3 steps each,
then runs a load of step writes (admit, claim, 3 x save_step, acknowledge, in a loop on 4
threads) and records each save_step's latency: S seconds before the backup, then during
`SqliteStore.backup` (the daemon's `POST /v1/backup`: VACUUM INTO on its own read connection,
fsync, integrity_check). Reports the backup's time and the p50/p99 step latency before and
during. Durable as ys always is (WAL, synchronous=FULL). Small: --executions 200 --seconds 0.5.

--transfer: an export of N executions of 3 steps each (one real execution's record, made
through the store, copied under N IDs) is imported with `ys import` into an empty home, then
exported again with `ys export` to a file, each command its own process: its wall time and
peak RSS (the kernel's ru_maxrss of that process). The same is done with N/10 first: RSS that
does not grow with N is the streaming. Small: --transfer --executions 200.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from common import machine_info, progress, remove_db, scratch_dir

from ys.store.sqlite import SqliteStore
from ys.values import Outcome, StepWrite


def one_execution(store: SqliteStore, i: int, tag: str, latencies: list[float] | None) -> None:
    eid = f"{tag}-{i}"
    store.admit("bench", {"i": i}, execution_id=eid)
    deliveries = [d for d in store.claim_due(limit=10) if d.execution_id == eid]
    for d in deliveries:
        for k in range(3):
            t0 = time.perf_counter()
            store.save_step(d.execution_id, d.token, f"s{k}", StepWrite("run", "completed", "1"))
            if latencies is not None:
                latencies.append(time.perf_counter() - t0)
        store.acknowledge(d.execution_id, d.token, Outcome("completed", i))


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


def export_file(root: Path, path: Path, n: int) -> int:
    """An export of `n` executions of 3 steps (one real one's record under `n` IDs); its
    size in bytes."""
    from ys.store.sql.transfer_lines import end, header, line_of

    store = SqliteStore(root / "template.db")
    one_execution(store, 0, "tpl", None)
    records: list[dict[str, Any]] = []
    store.export_records(records.append)
    store.close()
    remove_db(root / "template.db")
    (template,) = [r for r in records if r["kind"] == "execution"]
    text = json.dumps(template, ensure_ascii=False, separators=(",", ":"))
    assert text.count("tpl-0") >= 2, text  # the record and its admitted event name it
    with open(path, "w", encoding="utf-8") as f:
        f.write(header())
        for i in range(n):
            f.write(line_of(text.replace('"tpl-0"', f'"x{i:08d}"')))
        f.write(end({"script": 0, "value": 0, "effect": 0, "schedule": 0, "execution": n}))
    return path.stat().st_size


def timed(cmd: list[str], env: dict[str, str], stdout: Any = None) -> dict[str, Any]:
    """Run one command; its wall time and its peak RSS (MiB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, stdout=stdout or subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[2:])}: exit {proc.returncode}: {err}")
    return {"seconds": round(seconds, 2), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


def transfer_round(root: Path, n: int) -> dict[str, Any]:
    folder = root / f"n{n}"
    folder.mkdir()
    source = folder / "in.jsonl"
    progress(f"writing an export of {n} executions")
    size = export_file(folder, source, n)
    home = folder / "home"
    home.mkdir(mode=0o700)
    env = {**os.environ, "YS_HOME": os.fspath(home), "YS_AUTOSTART": "0"}
    env.pop("YS_DATABASE", None)
    ys = [sys.executable, "-m", "ys"]
    progress(f"ys import of {n} executions")
    imported = timed([*ys, "import", os.fspath(source)], env)
    source.unlink()
    progress(f"ys export of {n} executions")
    out = folder / "out.jsonl"
    with open(out, "w") as f:
        exported = timed([*ys, "export"], env, stdout=f)
    with open(out, "rb") as f:
        lines = sum(1 for _ in f)
    assert lines == n + 2, (lines, n)
    db = home / "ys.db"
    result = {
        "executions": n,
        "file_bytes": size,
        "db_bytes": db.stat().st_size,
        "import": {**imported, "per_second": round(n / imported["seconds"])},
        "export": {**exported, "per_second": round(n / exported["seconds"])},
    }
    shutil.rmtree(folder)
    return result


def transfer(args: argparse.Namespace) -> dict[str, Any]:
    with scratch_dir("keep") as root:
        small = transfer_round(root, max(1, args.executions // 10))
        large = transfer_round(root, args.executions)
    return {"rounds": [small, large], "machine": machine_info()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--executions", type=int, default=20_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--transfer", action="store_true", help="ys export and ys import instead")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.transfer:
        result = transfer(args)
        if args.json:
            json.dump(result, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            for r in result["rounds"]:
                i, e = r["import"], r["export"]
                print(
                    f"{r['executions']} executions of 3 steps ({r['file_bytes']} bytes of "
                    f"export, {r['db_bytes']} of database): import {i['seconds']} s "
                    f"({i['per_second']}/s), peak RSS {i['peak_rss_mib']} MiB; export "
                    f"{e['seconds']} s ({e['per_second']}/s), peak RSS {e['peak_rss_mib']} MiB"
                )
        return 0
    with scratch_dir("keep") as root:
        # Filled by `ys import` of a generated export (streamed, batched): a million
        # executions in minutes, where one transaction per write would take hours.
        progress(f"filling {args.executions} executions of 3 steps (ys import)")
        t0 = time.perf_counter()
        home = root / "home"
        home.mkdir(mode=0o700)
        source = root / "fill.jsonl"
        export_file(root, source, args.executions)
        env = {**os.environ, "YS_HOME": os.fspath(home), "YS_AUTOSTART": "0"}
        env.pop("YS_DATABASE", None)
        timed([sys.executable, "-m", "ys", "import", os.fspath(source)], env)
        source.unlink()
        fill_s = time.perf_counter() - t0
        store = SqliteStore(home / "ys.db", group_commit=True)

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
            "db_bytes": Path(home / "ys.db").stat().st_size,
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
