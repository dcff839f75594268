"""The DBOS half of bench/delivery.py. Runs inside bench/.venv-dbos (dbos==3.4.0), never in
the project venv; one configuration per process (DBOS is a process-wide singleton):

    bench/.venv-dbos/bin/python bench/dbos_side.py --db PATH --mode default|wal-normal|wal-full
    bench/.venv-dbos/bin/python bench/dbos_side.py --url postgresql://... --mode postgres

It launches DBOS with its SQLite system database at PATH, then answers one JSON command per
line on stdin with one JSON line on stdout, so the driver can interleave DBOS rounds with ys
rounds (this machine is shared; interleaving spreads the noise over both engines):

  {"cmd": "info"}            DBOS/SQLAlchemy versions and the pragmas DBOS's connections have
  {"cmd": "first", "n": N}   N samples: DBOS.start_workflow(wf) call start -> time.time() taken
                             by the workflow's first statement (each sample waits for its
                             workflow to finish before the next starts)
  {"cmd": "zero", "m": M}    M zero-step workflows started in a loop with DBOS.start_workflow,
                             then every handle's get_result(); workflows/s over the whole span
  {"cmd": "steps", "k": K}   one workflow calling K @DBOS.step() functions (each returns a small
                             int): steps/s inside the workflow (first step start -> last step
                             end, measured by the workflow) and end to end
  {"cmd": "par", "e": E, "k": K}
                             E workflows of K steps each started at once, then all awaited:
                             steps/s over the whole span (E x K / first start -> last result)
  {"cmd": "quit"}            DBOS.destroy() and exit

Modes: `default` leaves DBOS's engine as DBOS builds it; `wal-normal` adds a SQLAlchemy
"connect" listener that sets journal_mode=WAL and synchronous=NORMAL on every connection;
`wal-full` sets journal_mode=WAL and synchronous=FULL the same way: the durability ys has
(every commit fsynced in the WAL), so it is the peer every ys target is read against.
`postgres` (with --url, bench/pg_side.py) puts DBOS's system database on that PostgreSQL
database, left as the server has it (fsync and synchronous_commit on: ys's durability there).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def pragmas(engine: Any) -> dict[str, Any]:
    if engine.dialect.name == "postgresql":
        with engine.connect() as c:
            return {
                name: c.exec_driver_sql(f"SHOW {name}").scalar()
                for name in ("fsync", "synchronous_commit", "server_version")
            }
    with engine.connect() as c:
        journal = c.exec_driver_sql("PRAGMA journal_mode").scalar()
        sync = c.exec_driver_sql("PRAGMA synchronous").scalar()
        busy = c.exec_driver_sql("PRAGMA busy_timeout").scalar()
    return {
        "journal_mode": str(journal).upper(),
        "synchronous": SYNC_NAMES.get(int(sync), str(sync)),
        "busy_timeout_ms": busy,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db")
    ap.add_argument("--url", help="a PostgreSQL URL for DBOS's system database (--mode postgres)")
    ap.add_argument(
        "--mode", choices=["default", "wal-normal", "wal-full", "postgres"], required=True
    )
    args = ap.parse_args()
    if (args.mode == "postgres") != bool(args.url) or (not args.url and not args.db):
        ap.error("--mode postgres takes --url; the other modes take --db")

    # Answers go to the real stdout; anything DBOS or a library prints goes to stderr.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    import sqlalchemy as sa
    from dbos import DBOS
    from sqlalchemy import event

    if args.mode in ("wal-normal", "wal-full"):
        sync = "NORMAL" if args.mode == "wal-normal" else "FULL"

        @event.listens_for(sa.engine.Engine, "connect")
        def _wal(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
            dbapi_conn.execute(f"PRAGMA synchronous={sync}")

    DBOS(
        config={
            "name": "ys-delivery-bench",
            "system_database_url": args.url or "sqlite:///" + os.path.abspath(args.db),
            "log_level": "WARNING",
        }
    )

    marks: dict[str, float] = {}

    @DBOS.step()
    def tiny(i: int) -> int:
        return i + 1

    @DBOS.workflow()
    def first_line(tag: str) -> None:
        marks[tag] = time.time()

    @DBOS.workflow()
    def zero() -> None:
        return None

    @DBOS.workflow()
    def steps(k: int) -> dict[str, Any]:
        t0 = time.time()
        total = 0
        for i in range(k):
            total += tiny(i)
        t1 = time.time()
        return {"t0": t0, "t1": t1, "total": total}

    DBOS.launch()
    from dbos._dbos import _get_dbos_instance

    engine = _get_dbos_instance()._sys_db.engine
    counter = [0]

    def run_first(n: int) -> dict[str, Any]:
        lat = []
        for _ in range(n):
            counter[0] += 1
            tag = f"s{counter[0]}"
            t0 = time.time()
            DBOS.start_workflow(first_line, tag).get_result()
            lat.append(marks[tag] - t0)
        return {"samples": lat}

    def run_zero(m: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        handles = [DBOS.start_workflow(zero) for _ in range(m)]
        t_started = time.perf_counter()
        for h in handles:
            h.get_result()
        t1 = time.perf_counter()
        return {
            "n": m,
            "seconds": t1 - t0,
            "trigger_seconds": t_started - t0,
            "per_second": m / (t1 - t0),
        }

    def run_steps(k: int) -> dict[str, Any]:
        t0 = time.time()
        r = DBOS.start_workflow(steps, k).get_result()
        t1 = time.time()
        if r["total"] != sum(i + 1 for i in range(k)):
            raise RuntimeError(f"steps workflow returned {r}")
        inside = r["t1"] - r["t0"]
        return {
            "inside_seconds": inside,
            "e2e_seconds": t1 - t0,
            "inside_per_second": k / inside,
            "e2e_per_second": k / (t1 - t0),
        }

    def run_par(e: int, k: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        handles = [DBOS.start_workflow(steps, k) for _ in range(e)]
        for h in handles:
            if h.get_result()["total"] != sum(i + 1 for i in range(k)):
                raise RuntimeError("a steps workflow returned a wrong total")
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "steps_per_second": e * k / seconds}

    def info() -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "dbos_version": version("dbos"),
            "sqlalchemy": sa.__version__,
            "python": sys.version.split()[0],
            "mode": args.mode,
            "db": args.url or os.path.abspath(args.db),
            "pragmas": pragmas(engine),
            "pool_size": engine.pool.size() if hasattr(engine.pool, "size") else None,
        }

    try:
        # warm up: one of each, untimed
        run_first(1)
        run_zero(1)
        run_steps(5)
        answers.write(json.dumps({"ready": True}) + "\n")
        for line in sys.stdin:
            req = json.loads(line)
            cmd = req.get("cmd")
            try:
                if cmd == "quit":
                    break
                if cmd == "info":
                    res = info()
                elif cmd == "first":
                    res = run_first(int(req["n"]))
                elif cmd == "zero":
                    res = run_zero(int(req["m"]))
                elif cmd == "steps":
                    res = run_steps(int(req["k"]))
                elif cmd == "par":
                    res = run_par(int(req["e"]), int(req["k"]))
                else:
                    raise ValueError(f"unknown command {cmd!r}")
                answers.write(json.dumps({"ok": res}) + "\n")
            except Exception as exc:  # reported to the driver, which fails the bench
                answers.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
    finally:
        DBOS.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
