"""`ys list --tag k=v --limit 50` with 1,000,000 executions: the server's time per page.

    .venv/bin/python bench/list_tags.py                  # builds the home once (cached)
    .venv/bin/python bench/list_tags.py --rows 100000    # a smaller one
    .venv/bin/python bench/list_tags.py --json

The home is built once per row count under bench/results/list-tags-<rows>/ (reused while its
schema version matches; `--rebuild` makes it again): executions over 29 days, each with two or
three tags (`team` one of 10, `env` one of 3, and on one in 10,000 a rare `customer`), mostly
completed, some failed, each record folded from its history with the store's own `project` and
inserted with the store's own statements (the tag rows too), in large transactions.

Server time is what the daemon's list route does for one page: `store.list(...)` on the
daemon's store and each record rendered to JSON (`views.record`, `json.dumps`), timed in this
process on the same file, median of REPEATS after a warm-up. Wall time is the whole request
over the socket to a real daemon on that home (`ys.Client.list`), for comparison. Target (issue
15): <= 50 ms server time at 1,000,000 executions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import REPO_ROOT, RESULTS_DIR, filesystem_of, load_average, machine_info

sys.path.insert(0, str(REPO_ROOT))

from ys.store.eventdata import CompletedData, FailedData  # noqa: E402
from ys.store.records import COMPLETED, FAILED, Event  # noqa: E402
from ys.store.sql.events import admission_event  # noqa: E402
from ys.store.sql.rows import new_record_row, project, tag_rows  # noqa: E402
from ys.store.sqlite.admissions import INSERT_EVENT, INSERT_EXECUTION, INSERT_TAG  # noqa: E402
from ys.store.sqlite.schema import MIGRATIONS  # noqa: E402

DAY = 86400.0
TARGET_MS = 50.0
WORKFLOWS = ["backup", "report", "charge-order", "sync", "thumbnail", "mail"]
BATCH = 50_000


def tags_of(i: int) -> dict[str, str]:
    tags = {"team": f"t{i % 10}", "env": ("prod", "staging", "dev")[i % 3]}
    if i % 10_000 == 7:
        tags["customer"] = "acme"
    return tags


def build(path: Path, rows: int) -> None:
    from ys.store.sqlite import SqliteStore

    SqliteStore(path).close()  # the schema, migrated as the daemon would
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA synchronous=OFF")  # building a bench file, not serving one
    rng = random.Random(15)
    now = time.time()
    started = time.perf_counter()
    for lo in range(0, rows, BATCH):
        ex_rows, ev_rows, tg_rows = [], [], []
        for i in range(lo, min(rows, lo + BATCH)):
            at = now - 29 * DAY + (29 * DAY - 3600) * i / rows
            wf = WORKFLOWS[i % len(WORKFLOWS)]
            eid = f"{wf}/{i:07d}"
            evs = [admission_event(eid, wf, f'{{"n":{i}}}', "{}", None, at, None, tags_of(i))]
            if rng.random() < 0.95:
                evs.append(Event(COMPLETED, at + 0.5, CompletedData({"n": i})))
            else:
                evs.append(Event(FAILED, at + 0.5, FailedData({"name": "E", "message": str(i)})))
            record, erows, nbytes = project(None, evs)
            ex_rows.append(new_record_row(record, nbytes))
            ev_rows.extend(erows)
            tg_rows.extend(tag_rows(record))
        c.execute("BEGIN")
        c.executemany(INSERT_EXECUTION, ex_rows)
        c.executemany(INSERT_EVENT, ev_rows)
        c.executemany(INSERT_TAG, tg_rows)
        c.execute("COMMIT")
        done = min(rows, lo + BATCH)
        print(f"  built {done:,} ({time.perf_counter() - started:.0f}s)", file=sys.stderr)
    c.execute("INSERT OR REPLACE INTO settings (key, value) VALUES ('last_gc_at', ?)", (repr(now),))
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.execute("ANALYZE")
    c.close()


def _schema(db: Path) -> int:
    try:
        c = sqlite3.connect(db)
        return int(c.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0])
    except (sqlite3.Error, TypeError):
        return -1


def home_for(rows: int, rebuild: bool) -> Path:
    home = RESULTS_DIR / f"list-tags-{rows}"
    db = home / "ys.db"
    if not (db.exists() and not rebuild and _schema(db) == len(MIGRATIONS)):
        shutil.rmtree(home, ignore_errors=True)
        (home / "workflows").mkdir(parents=True, mode=0o700)
        os.chmod(home, 0o700)
        print(f"building {rows:,} executions in {db} (once)", file=sys.stderr)
        build(db, rows)
    for wf in WORKFLOWS:
        (home / "workflows" / f"{wf}.py").write_text(
            "import ys\n\n@ys.workflow\ndef main(step, params):\n    return 1\n"
        )
    return home


QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("--tag team=t3 (1 in 10)", {"tags": {"team": "t3"}}),
    ("--tag customer=acme (1 in 10,000)", {"tags": {"customer": "acme"}}),
    ("--tag team=t3 --tag env=prod", {"tags": {"team": "t3", "env": "prod"}}),
    ("--tag team=t3 --status failed", {"tags": {"team": "t3"}, "statuses": ["failed"]}),
    ("--tag team=t3 --workflow report", {"tags": {"team": "t3"}, "workflow": "report"}),
    ("--tag team=t3 --since 1d", {"tags": {"team": "t3"}, "since": "1d"}),
    ("--tag team=t3 page 2", {"tags": {"team": "t3"}, "page": 2}),
    ("(no filter)", {}),
]


def _store_args(q: dict[str, Any], now: float) -> dict[str, Any]:
    args = {k: v for k, v in q.items() if k not in ("since", "page")}
    if "since" in q:
        args["since"] = now - DAY
    return args


def server_ms(store: Any, q: dict[str, Any], repeats: int) -> float:
    """The list route's work for one page: the store's read and the JSON of its records."""
    from ys.daemon import views

    args = _store_args(q, time.time())
    if q.get("page") == 2:
        args["page_token"] = store.list(limit=50, **args).next_page_token

    def once() -> None:
        page = store.list(limit=50, **args)
        json.dumps({"executions": [views.record(r) for r in page.items]})

    once()
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        once()
        runs.append((time.perf_counter() - t) * 1000)
    return statistics.median(runs)


def wall_ms(home: Path, q: dict[str, Any], repeats: int) -> float:
    from ys.client import Client

    with Client(str(home / "run" / "ys.sock"), timeout=60) as c:
        args: dict[str, Any] = {}
        if "tags" in q:
            args["tags"] = q["tags"]
        if "statuses" in q:
            args["status"] = q["statuses"]
        if "workflow" in q:
            args["workflow"] = q["workflow"]
        if "since" in q:
            args["since"] = DAY
        if q.get("page") == 2:
            args["page_token"] = c.list(limit=50, **args)["next_page_token"]
        c.list(limit=50, **args)
        runs = []
        for _ in range(repeats):
            t = time.perf_counter()
            page = c.list(limit=50, **args)
            runs.append((time.perf_counter() - t) * 1000)
            assert len(page["executions"]) <= 50
    return statistics.median(runs)


class Daemon:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {
            **os.environ,
            "YS_HOME": str(home),
            "YS_WORKFLOWS": str(home / "workflows"),
            "YS_AUTOSTART": "0",
            "YS_RETENTION_DAYS": "100000",
            "YS_LOG_LEVEL": "WARNING",
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Daemon:
        from ys.client import Client

        log = open(self.home / "daemon-bench.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ys.daemon", "run"],
            env=self.env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with Client(str(self.home / "run" / "ys.sock"), timeout=2) as c:
                    c.version()
                return self
            except Exception:
                if self.proc.poll() is not None:
                    raise SystemExit(f"the daemon exited; see {log.name}") from None
                time.sleep(0.1)
        raise SystemExit("the daemon did not answer in 120 s")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--no-daemon", action="store_true", help="server time only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    home = home_for(args.rows, args.rebuild)
    load = [load_average()]
    from ys.store.sqlite import SqliteStore

    results = []
    store = SqliteStore(home / "ys.db", read_only=True)
    try:
        for name, q in QUERIES:
            results.append(
                {"query": name, "server_ms": round(server_ms(store, q, args.repeats), 2)}
            )
            print(f"  {name}: {results[-1]['server_ms']} ms", file=sys.stderr)
    finally:
        store.close()
    if not args.no_daemon:
        with Daemon(home):
            for r, (_, q) in zip(results, QUERIES, strict=True):
                r["wall_ms"] = round(wall_ms(home, q, args.repeats), 2)
    load.append(load_average())
    doc = {
        "rows": args.rows,
        "target_ms": TARGET_MS,
        "filesystem": filesystem_of(home).describe(),
        "machine": machine_info(),
        "load_average": load,
        "queries": results,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"ys list --limit 50, {args.rows:,} executions, median of {args.repeats}")
    print(f"{'query':<40} {'server ms':>10} {'wall ms':>9}  target {TARGET_MS:.0f} ms")
    for r in results:
        ok = "ok" if r["server_ms"] <= TARGET_MS else "OVER"
        wall = f"{r['wall_ms']:>9.1f}" if "wall_ms" in r else f"{'-':>9}"
        print(f"{r['query']:<40} {r['server_ms']:>10.2f} {wall}  {ok}")
    print(f"load average: {load[0]} -> {load[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
