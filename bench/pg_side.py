"""ys on PostgreSQL next to DBOS 3.4 on the same PostgreSQL server, at the same durability.

    .venv/bin/python bench/pg_side.py [--quick] [--rounds R] [--k K] [--m M] [--json] [--keep]

One throw-away PostgreSQL server (bench/common.py `postgres_databases`: fsync on,
synchronous_commit on, as a real server; or YS_BENCH_POSTGRES_URL's) with two fresh
databases: one for a real ys daemon (`YS_DATABASE`), one for DBOS's system database (DBOS
in-process, as its users run it: bench/dbos_side.py --mode postgres, in bench/.venv-dbos). A
ys daemon on SQLite (WAL, synchronous=FULL) runs beside them, for the same figures on one box.
Measurements, in interleaved rounds (the order rotates each round), each engine's steps/s
and workflows/s, and the ratios ys-on-PostgreSQL / DBOS per round:

  steps   one execution running K steps (each returns a small int): steps/s inside the
          workflow (first step start -> last step end) and end to end
  zero    M zero-step workflows triggered in a loop, then all awaited: workflows/s

A step's save on PostgreSQL is one request plus its commit (tests/postgres/
test_pg_round_trips.py counts it); these figures are what that buys end to end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from common import fmt_ratio, machine_info, postgres_databases, progress, ratio, scratch_dir, table
from delivery import (
    Daemon,
    DbosSide,
    YsSide,
    compile_project,
    ensure_dbos_venv,
    rotate,
    workflow_sources,
)


def start_ys(home: Path, concurrency: int, database: str | None) -> tuple[Daemon, YsSide]:
    d = Daemon(home, concurrency)
    if database is not None:
        d.env["YS_DATABASE"] = database
    d.write_workflows(workflow_sources(home / "first-line.marks"))
    d.start(["zero", "steps"])
    side = YsSide(d, home / "first-line.marks")
    side.name = "ys-postgres" if database is not None else "ys-sqlite"
    side.warm_up()
    return d, side


def measure(scratch: Path, rounds: int, k: int, m: int, concurrency: int) -> dict[str, Any]:
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
            for r in range(rounds):
                row: dict[str, Any] = {}
                for side in rotate(sides, r):
                    progress(f"round {r + 1}/{rounds}: {side.name}")
                    steps = side.steps(k)
                    zero = side.zero(m)
                    row[side.name] = {
                        "steps_inside": steps["inside_per_second"],
                        "steps_e2e": steps["e2e_per_second"],
                        "workflows": zero["per_second"],
                    }
                res["rounds"].append(row)
        finally:
            for side in sides:
                side.close()
            for d in daemons:
                d.stop()
    return res


KEYS = (
    ("steps_inside", "steps/s in one execution"),
    ("steps_e2e", "steps/s end to end"),
    ("workflows", "zero-step workflows/s"),
)


def report(res: dict[str, Any]) -> str:
    rounds = res["rounds"]
    names = list(rounds[0])
    rows = []
    for key, label in KEYS:
        per = {n: statistics.median(r[n][key] for r in rounds) for n in names}
        ratios = [ratio(r["ys-postgres"][key], r["dbos-postgres"][key]) for r in rounds]
        rows.append(
            [label]
            + [f"{per[n]:,.0f}" for n in ("ys-postgres", "dbos-postgres", "ys-sqlite")]
            + [" ".join(fmt_ratio(x) for x in ratios)]
        )
    head = ["", "ys on PostgreSQL", "DBOS on PostgreSQL", "ys on SQLite", "ys/DBOS per round"]
    return table(head, rows, right={1, 2, 3})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 rounds, K=200, M=50")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=500, help="steps in the steps execution")
    ap.add_argument("--m", type=int, default=100, help="zero-step workflows per burst")
    ap.add_argument("--concurrency", type=int, default=4, help="ys daemons' --concurrency")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.k, args.m = 2, 200, 50
    venv = ensure_dbos_venv()
    compile_project()
    with scratch_dir("pg-side", keep=args.keep) as scratch:
        res = measure(scratch, args.rounds, args.k, args.m, args.concurrency)
    res.update(machine=machine_info(), dbos_venv=venv, k=args.k, m=args.m)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"DBOS {venv['dbos']} ({res['dbos_info']['pragmas']}); K={args.k}, M={args.m}")
    print(report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
