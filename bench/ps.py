"""`ys ps` with many live executions: the server's time for its first page.

    .venv/bin/python bench/ps.py                       # 100,000 live executions
    .venv/bin/python bench/ps.py --live 20000 --done 200000 --json

Builds (once per size, under bench/results/ps-<live>-<done>/) a database holding `--live`
admitted executions and `--done` completed ones admitted after them (a backlog of old live
work under newer finished work: what a scan in admission order has to walk through), each record folded from its history with the
store's own `project` and inserted with the store's own statements. Server time is what the
daemon's `GET /v1/executions?status=admitted&status=running&status=suspended` does for one
page: `store.list(...)` on a store over that file and each record rendered to JSON, median of
--repeats after a warm-up, at `ys ps`'s page size (100) and at its old one (1,000). Beside it,
in the same run, the query ys ran before (one `status IN (...)` over the three statuses, which
reads and sorts every live row) on the same file, for the ratio.
Target: <= 20 ms server time with 100,000 live executions.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path

from common import REPO_ROOT, RESULTS_DIR, load_average

TARGET_MS = 20.0
LIVE = ["admitted", "running", "suspended"]
BATCH = 50_000


def build(db: Path, live: int, done: int) -> None:
    from ys.store.eventdata import CompletedData
    from ys.store.records import COMPLETED, Event
    from ys.store.sql.events import admission_event
    from ys.store.sql.rows import new_record_row, project
    from ys.store.sqlite import SqliteStore
    from ys.store.sqlite.admissions import INSERT_EVENT, INSERT_EXECUTION

    SqliteStore(db).close()  # the schema, migrated as the daemon would
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("PRAGMA synchronous=OFF")  # building a bench file, not serving one
    now = time.time()
    total = live + done
    for lo in range(0, total, BATCH):
        ex_rows, ev_rows = [], []
        for i in range(lo, min(total, lo + BATCH)):
            at = now - 86400 + 86000 * i / total
            eid = f"job/{i:07d}"
            evs = [admission_event(eid, "job", f'{{"n":{i}}}', "{}", None, at, None, None)]
            if i >= live:  # the newest are finished: a backlog of old live work under them
                evs.append(Event(COMPLETED, at + 0.5, CompletedData(i)))
            record, erows, nbytes = project(None, evs)
            ex_rows.append(new_record_row(record, nbytes))
            ev_rows.extend(erows)
        c.execute("BEGIN")
        c.executemany(INSERT_EXECUTION, ex_rows)
        c.executemany(INSERT_EVENT, ev_rows)
        c.execute("COMMIT")
        print(f"  built {min(total, lo + BATCH):,}", file=sys.stderr)
    c.execute("ANALYZE")
    c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--live", type=int, default=100_000)
    ap.add_argument("--done", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, str(REPO_ROOT))
    from ys.daemon import views
    from ys.store.sql.reads import E_FULL
    from ys.store.sql.rows import row_to_record
    from ys.store.sqlite import SqliteStore

    home = RESULTS_DIR / f"ps-{a.live}-{a.done}"
    db = home / "ys.db"
    if not db.exists():
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        build(db, a.live, a.done)
    store = SqliteStore(db, read_only=True)
    counts = dict(
        sqlite3.connect(db).execute("SELECT status, COUNT(*) FROM executions GROUP BY status")
    )
    out: dict[str, object] = {"counts": counts, "load": load_average()}
    raw = sqlite3.connect(db)
    old_sql = (
        f"SELECT {E_FULL} FROM executions e WHERE e.status IN (?,?,?) "
        "ORDER BY e.admitted_at DESC, e.execution_id ASC LIMIT ?"
    )

    def timed(fn: object) -> float:
        assert callable(fn)
        fn()
        runs = []
        for _ in range(a.repeats):
            t = time.perf_counter()
            fn()
            runs.append((time.perf_counter() - t) * 1000)
        return round(statistics.median(runs), 2)

    try:
        for limit in (100, 1000):

            def now(limit: int = limit) -> None:
                page = store.list(statuses=LIVE, limit=limit)
                assert len(page.items) == min(limit, a.live)
                json.dumps({"executions": [views.record(r) for r in page.items]})

            def before(limit: int = limit) -> None:
                rows = raw.execute(old_sql, (*LIVE, limit + 1)).fetchall()
                items = [row_to_record(r) for r in rows[:limit]]
                json.dumps({"executions": [views.record(r) for r in items]})

            out[f"page_{limit}_ms"] = timed(now)
            out[f"page_{limit}_before_ms"] = timed(before)
    finally:
        store.close()
        raw.close()
    if a.json:
        print(json.dumps(out))
        return
    print(f"ys ps, first page, server time ({counts}; load {out['load']}):")
    for limit in (100, 1000):
        ms, was = out[f"page_{limit}_ms"], out[f"page_{limit}_before_ms"]
        assert isinstance(ms, float) and isinstance(was, float)
        verdict = f"; target <= {TARGET_MS:g} ms: {'PASS' if ms <= TARGET_MS else 'FAIL'}"
        print(
            f"  page of {limit}: {ms} ms (one IN over the statuses, as before: {was} ms, "
            f"{was / ms:.1f}x){verdict if limit == 100 else ''}"
        )


if __name__ == "__main__":
    main()
