"""ys on PostgreSQL next to DBOS 3.4 on the same PostgreSQL server, at the same durability.

    .venv/bin/python bench/pg_side.py [--quick] [--rounds R] [--k K] [--m M] [--n N]
                                      [--threads T] [--json] [--keep]
    .venv/bin/python bench/pg_side.py --round-trips [--k K]   # only the round trips

One throw-away PostgreSQL server (bench/common.py `postgres_databases`: fsync on,
synchronous_commit on, as a real server; or YS_BENCH_POSTGRES_URL's) with two fresh
databases: one for a real ys daemon (`YS_DATABASE`), one for DBOS's system database (DBOS
in-process, as its users run it: bench/dbos_side.py --mode postgres, in bench/.venv-dbos). A
ys daemon on SQLite (WAL, synchronous=FULL) runs beside them, for the same figures on one box.
Measurements, in interleaved rounds (the order rotates each round), each engine's steps/s
and workflows/s, and the ratios ys-on-PostgreSQL / DBOS per round:

  steps   one execution running K steps (each returns a small int): steps/s inside the
          workflow (first step start -> last step end) and end to end
  zero    M zero-step workflows triggered in a loop, then all awaited: workflows/s; and
          the CPU every process of the bench used meanwhile (the daemons, their workers, the
          PostgreSQL server, DBOS, this client), per workflow
  zero from T threads (ys only): the same M, each of T client threads triggering one and
          waiting for it in turn, as a ys user bursts from several threads (DBOS's
          start_workflow does not wait for the workflow: its loop above is its burst)
  first   trigger to the workflow's first line, N samples one after the other: the p50
  16 x 50 16 executions of 50 steps each started at once, all awaited: steps/s over the
          span (the ys daemons run with --concurrency 16, so all 16 run at once)
  admissions (ys only): M triggers due in an hour (admitted, not run) from T threads:
          admissions/s on PostgreSQL and on SQLite

Targets, each PASS/FAIL on the median of the per-round ratios ys-on-PostgreSQL /
DBOS: steps in one execution >= 3x, the burst >= 1x, first-line p50 <= 2x DBOS's (a ratio
of latencies), 16 x 50 >= 2x.

Round trips, untimed, after the rounds (the timed rounds never go through it): a ys daemon
of its own, every PostgreSQL connection of it through a counting proxy (bench/pg_proxy.py: a
round trip is a turn on a connection, client bytes then server bytes); all its connections'
round trips while one execution runs K steps, over K (target <= 3: everything the daemon
does per step, reads included, where tests/postgres/test_pg_round_trips.py counts the
writer's operations), and per zero-step workflow.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from common import (
    fmt_ratio,
    load_average,
    machine_info,
    postgres_databases,
    postmaster_pids,
    progress,
    ratio,
    scratch_dir,
    table,
    tree_cpu_seconds,
)
from delivery import (
    Daemon,
    DbosSide,
    YsSide,
    compile_project,
    ensure_dbos_venv,
    median,
    rotate,
    workflow_sources,
)
from pg_proxy import CountingProxy

PAR_E, PAR_K = 16, 50
ZERO_COUNTED = 5  # zero-step workflows whose round trips are counted, one after the other
ROUND_TRIPS_TARGET = 3.0  # per step, everything the daemon does included


def start_ys(home: Path, concurrency: int, database: str | None) -> tuple[Daemon, YsSide]:
    d = Daemon(home, concurrency)
    if database is not None:
        d.env["YS_DATABASE"] = database
    d.write_workflows(workflow_sources(home / "first-line.marks"))
    d.start(["zero", "steps", "first-line"])
    side = YsSide(d, home / "first-line.marks")
    side.name = "ys-postgres" if database is not None else "ys-sqlite"
    side.warm_up()
    return d, side


def _ys_zero_threads(side: YsSide, m: int, threads: int) -> float:
    def one(_: int) -> None:
        with side.d.client() as c:
            rec = c.wait(c.trigger("zero")["execution_id"], timeout=600)
            if rec["status"] != "completed":
                raise RuntimeError(f"{rec['execution_id']} ended {rec['status']}")

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(m)))
    return m / (time.perf_counter() - t0)


def _ys_admissions(side: YsSide, m: int, threads: int) -> float:
    def one(_: int) -> None:
        with side.d.client() as c:
            c.trigger("zero", due_in=3600)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(m)))
    return m / (time.perf_counter() - t0)


def _ys_par(side: YsSide, e: int, k: int) -> float:
    t0 = time.perf_counter()
    ids = [side.c.trigger("steps", params={"k": k})["execution_id"] for _ in range(e)]
    for eid in ids:
        rec = side.c.wait(eid, timeout=600)
        if rec["status"] != "completed":
            raise RuntimeError(f"{eid} ended {rec['status']}")
    return e * k / (time.perf_counter() - t0)


def one_round(
    side: Any, k: int, m: int, n: int, threads: int, cpu_roots: list[int]
) -> dict[str, Any]:
    """Every measurement of one engine in one round."""
    steps = side.steps(k)
    cpu0 = tree_cpu_seconds(cpu_roots)
    zero = side.zero(m)
    cpu = tree_cpu_seconds(cpu_roots) - cpu0
    row: dict[str, Any] = {
        "steps_inside": steps["inside_per_second"],
        "steps_e2e": steps["e2e_per_second"],
        "workflows": zero["per_second"],
        "cpu_ms_per_workflow": cpu * 1000 / m,
        "first_p50_ms": median(side.first(n)["samples"]) * 1000,
    }
    if isinstance(side, YsSide):
        row["par_steps"] = _ys_par(side, PAR_E, PAR_K)
        row["workflows_threads"] = _ys_zero_threads(side, m, threads)
        row["admissions"] = _ys_admissions(side, m, threads)
    else:
        row["par_steps"] = side.call("par", e=PAR_E, k=PAR_K)["steps_per_second"]
    return row


def round_trips(scratch: Path, url: str, k: int, concurrency: int) -> dict[str, Any]:
    """Untimed, after the rounds: a ys daemon of its own on a database of its own, every
    connection of it through a counting proxy (bench/pg_proxy.py). The round trips of all
    its connections (claims, step saves, lease renewals, the long poll's reads, the
    listener...) while one execution runs K steps, over K; and per zero-step workflow
    (ZERO_COUNTED of them, triggered and awaited one after the other)."""
    proxy = CountingProxy(url)
    through = proxy.start()
    try:
        d, side = start_ys(scratch / "ys-pg-counted", concurrency, through)
        try:
            t0 = proxy.turns()
            side.steps(k)
            steps = proxy.turns() - t0
            t0 = proxy.turns()
            for _ in range(ZERO_COUNTED):
                side.zero(1)
            zero = proxy.turns() - t0
        finally:
            side.close()
            d.stop()
    finally:
        proxy.close()
    return {
        "k": k,
        "steps_round_trips": steps,
        "per_step": steps / k,
        "per_zero_step_workflow": zero / ZERO_COUNTED,
    }


def measure(
    scratch: Path, rounds: int, k: int, m: int, n: int, threads: int, concurrency: int
) -> dict[str, Any]:
    res: dict[str, Any] = {"rounds": []}
    daemons: list[Daemon] = []
    sides: list[Any] = []
    with postgres_databases(scratch) as dbs:
        try:
            progress("starting: ys on PostgreSQL, ys on SQLite, DBOS on PostgreSQL")
            for home, url in (("ys-pg", dbs.create()), ("ys-sqlite", None)):
                d, side = start_ys(scratch / home, concurrency, url)
                daemons.append(d)
                sides.append(side)
            dbos = DbosSide(scratch, "postgres", url=dbs.create())
            dbos.wait_ready()
            sides.append(dbos)
            res["dbos_info"] = dbos.call("info")
            # every process of the bench: this client, the daemons and their workers, DBOS
            # (all descendants of this process) and the PostgreSQL server (pg_ctl's: not one)
            cpu_roots = [os.getpid(), *postmaster_pids(scratch)]
            for r in range(rounds):
                row: dict[str, Any] = {"load": load_average()}
                for side in rotate(sides, r):
                    progress(f"round {r + 1}/{rounds}: {side.name}")
                    row[side.name] = one_round(side, k, m, n, threads, cpu_roots)
                res["rounds"].append(row)
        finally:
            for side in sides:
                side.close()
            for d in daemons:
                d.stop()
        progress("round trips: ys on PostgreSQL through a counting proxy (untimed)")
        res["round_trips"] = round_trips(scratch, dbs.create(), k, concurrency)
    return res


NAMES = ("ys-postgres", "dbos-postgres", "ys-sqlite")
# (key, label, format, higher is better)
KEYS = (
    ("steps_inside", "steps/s in one execution", "{:,.0f}"),
    ("steps_e2e", "steps/s end to end", "{:,.0f}"),
    ("workflows", "zero-step workflows/s (a loop)", "{:,.0f}"),
    ("workflows_threads", "zero-step workflows/s ({t} threads)", "{:,.0f}"),
    ("cpu_ms_per_workflow", "CPU ms per zero-step workflow", "{:,.1f}"),
    ("first_p50_ms", "trigger to first line p50, ms", "{:,.1f}"),
    ("par_steps", "steps/s, 16 x 50 at once", "{:,.0f}"),
    ("admissions", "admissions/s ({t} threads)", "{:,.0f}"),
)
# (label, key, ys-on-PostgreSQL's figure over DBOS's at least (or at most, for a latency))
TARGETS = (
    ("steps in one execution >= 3x DBOS", "steps_inside", 3.0, True),
    ("burst of zero-step workflows >= 1x DBOS", "workflows", 1.0, True),
    ("the burst from {t} threads >= 1x DBOS", "workflows_threads", 1.0, True),
    ("trigger to first line p50 <= 2x DBOS's", "first_p50_ms", 2.0, False),
    ("16 x 50 steps/s >= 2x DBOS", "par_steps", 2.0, True),
)


def _ratios(rounds: list[dict[str, Any]], key: str) -> list[float]:
    """ys on PostgreSQL over DBOS, per round (DBOS's loop is its burst from threads too)."""
    theirs = "workflows" if key == "workflows_threads" else key
    return [ratio(r["ys-postgres"][key], r["dbos-postgres"][theirs]) for r in rounds]


def report(res: dict[str, Any], threads: int) -> str:
    rounds = res["rounds"]
    rows = []
    for key, label, form in KEYS:
        cells = []
        for n in NAMES:
            vals = [r[n][key] for r in rounds if key in r[n]]
            cells.append(form.format(statistics.median(vals)) if vals else "-")
        compared = key == "workflows_threads" or key in rounds[0]["dbos-postgres"]
        per = _ratios(rounds, key) if compared else []
        rows.append([label.format(t=threads), *cells, " ".join(fmt_ratio(x) for x in per)])
    head = ["", "ys on PostgreSQL", "DBOS on PostgreSQL", "ys on SQLite", "ys/DBOS per round"]
    lines = [table(head, rows, right={1, 2, 3}), ""]
    for label, key, bound, higher in TARGETS:
        mid = statistics.median(_ratios(rounds, key))
        ok = mid >= bound if higher else mid <= bound
        lines.append(f"{label.format(t=threads)}: {fmt_ratio(mid)} {'PASS' if ok else 'FAIL'}")
    if res.get("round_trips"):
        lines.extend(_round_trip_lines(res["round_trips"]))
    loads = [r["load"][0] for r in rounds if r.get("load")]
    if loads:
        lines.append(f"load average (1 min) at each round's start: {loads}")
    return "\n".join(lines)


def _round_trips_only(k: int, concurrency: int, json_: bool) -> int:
    compile_project()
    with scratch_dir("pg-side", keep=False) as scratch, postgres_databases(scratch) as dbs:
        rt = round_trips(scratch, dbs.create(), k, concurrency)
    if json_:
        print(json.dumps({"round_trips": rt, "machine": machine_info()}, indent=2))
    else:
        print("\n".join(_round_trip_lines(rt)))
    return 0


def _round_trip_lines(rt: dict[str, Any]) -> list[str]:
    per = rt["per_step"]
    return [
        f"round trips per step <= {ROUND_TRIPS_TARGET:g} (all the daemon's connections, "
        f"one execution of {rt['k']} steps: {rt['steps_round_trips']}): {per:.2f} "
        f"{'PASS' if per <= ROUND_TRIPS_TARGET else 'FAIL'}",
        f"round trips per zero-step workflow: {rt['per_zero_step_workflow']:.1f}",
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 rounds, K=200, M=50, N=10")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=500, help="steps in the steps execution")
    ap.add_argument("--m", type=int, default=100, help="zero-step workflows per burst")
    ap.add_argument("--n", type=int, default=20, help="first-line samples per round")
    ap.add_argument("--threads", type=int, default=8, help="client threads of a ys burst")
    ap.add_argument("--concurrency", type=int, default=PAR_E, help="ys daemons' --concurrency")
    ap.add_argument(
        "--round-trips",
        action="store_true",
        help="only count the round trips (no DBOS, no timed rounds)",
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.k, args.m, args.n = 2, 200, 50, 10
    if args.round_trips:
        return _round_trips_only(args.k, args.concurrency, args.json)
    venv = ensure_dbos_venv()
    compile_project()
    with scratch_dir("pg-side", keep=args.keep) as scratch:
        res = measure(scratch, args.rounds, args.k, args.m, args.n, args.threads, args.concurrency)
    res.update(machine=machine_info(), dbos_venv=venv, k=args.k, m=args.m, n=args.n)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(
        f"DBOS {venv['dbos']} ({res['dbos_info']['pragmas']}); K={args.k}, M={args.m}, "
        f"N={args.n}; ys --concurrency {args.concurrency}"
    )
    print(report(res, args.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
