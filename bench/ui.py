"""How long each dashboard page takes the daemon to render with 1,000,000 executions.

    .venv/bin/python bench/ui.py                    # builds the home once (cached), ~1 min a run
    .venv/bin/python bench/ui.py --rows 100000      # a smaller home
    .venv/bin/python bench/ui.py --json

The home is built once per row count under bench/results/ui-<rows>/ (reused while its schema
version matches; `--rebuild` makes it again): executions spread over 29 days, each with the
history a real one has (admitted, claimed, one or two steps, an outcome), folded with the
store's own `project` so every record equals its history, inserted in large transactions.
Mostly completed, some failed (a few hundred in the last 24 hours), cancelled, suspended on
timers and store keys, and a few running-looking ones that recovery releases at start.

Then a real daemon starts on that home and each page is fetched over its socket, signed in as
a browser is, REPEATS times after a warm-up; the figure is the median of the page's
`Server-Timing` (the daemon's time from the request to the rendered page, the socket and
client excluded). Pages with a filter that no index serves (a rare `workflow`) are reported
too, marked. Then each picture's store read is timed on its own, the store opened read-only
(`chart_reads`).
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

from common import REPO_ROOT, RESULTS_DIR, load_average, machine_info

sys.path.insert(0, str(REPO_ROOT))

from tests.ui.ui_support import UiSession  # noqa: E402
from ys.store.base import SLOTS_KEPT  # noqa: E402
from ys.store.eventdata import (  # noqa: E402
    CancelledData,
    CancelRequestedData,
    ClaimedData,
    CompletedData,
    FailedData,
    StepData,
    SuspendedData,
)
from ys.store.records import CLAIMED, COMPLETED, FAILED, STEP, SUSPENDED, Event  # noqa: E402
from ys.store.sql import charts  # noqa: E402
from ys.store.sql.events import admission_event  # noqa: E402
from ys.store.sql.rows import new_record_row, project  # noqa: E402
from ys.store.sqlite.admissions import INSERT_EVENT, INSERT_EXECUTION  # noqa: E402
from ys.store.sqlite.schema import MIGRATIONS  # noqa: E402

DAY = 86400.0
TARGET_MS = 50.0
WORKFLOWS = ["backup", "report", "charge-order", "sync", "thumbnail", "mail"]
RARE = "rare-one"  # a workflow with 20 executions in a million (executions_workflow serves it)


def _events(i: int, now: float, rng: random.Random) -> tuple[str, list[Event]]:
    at = now - 29 * DAY + (29 * DAY - 7200) * i / ROWS
    wf = RARE if i % (ROWS // 20) == 7 else WORKFLOWS[i % len(WORKFLOWS)]
    eid = f"{wf}/{i:07d}"
    evs = [
        admission_event(eid, wf, f'{{"n":{i}}}', "{}", None, at),
        Event(CLAIMED, at + 0.01, ClaimedData(attempt=1)),
        Event(STEP, at + 0.2, StepData("load", "run", "completed")),
    ]
    roll = rng.random()
    if i >= ROWS - 400 and roll < 0.5:  # recent failures, inside the last 24 hours
        evs.append(
            Event(
                FAILED,
                at + 0.5,
                FailedData({"name": "TimeoutError", "message": "the API did not answer"}),
            )
        )
    elif roll < 0.90:
        evs.append(Event(COMPLETED, at + 0.5, CompletedData({"ok": True, "n": i})))
    elif roll < 0.96:
        evs.append(
            Event(FAILED, at + 0.5, FailedData({"name": "ValueError", "message": f"bad row {i}"}))
        )
    elif roll < 0.98:
        evs.append(Event("cancel_requested", at + 0.3, CancelRequestedData()))
        evs.append(Event("cancelled", at + 0.4, CancelledData()))
    else:
        wake = now + rng.uniform(60, 30 * DAY)
        evs.append(
            Event(
                STEP,
                at + 0.3,
                StepData("nap", "sleep", "completed", wake_at=wake),
            )
        )
        evs.append(Event(SUSPENDED, at + 0.31, SuspendedData()))
    return eid, evs


ROWS = 1_000_000


def _id(i: int) -> str:
    return f"{WORKFLOWS[i % len(WORKFLOWS)]}/{i:07d}"


def build(path: Path, rows: int) -> None:
    """The database of a home with `rows` executions (see the module docstring)."""
    global ROWS
    ROWS = rows
    from ys.store.sqlite import SqliteStore

    SqliteStore(path).close()  # the schema, migrated as the daemon would
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA synchronous=OFF")  # building a bench file, not serving one
    rng = random.Random(42)
    now = time.time()
    started = time.perf_counter()
    batch = 50_000
    for lo in range(0, rows, batch):
        ex_rows, ev_rows = [], []
        took: dict[
            tuple[int, int], int
        ] = {}  # the delivery durations' rollup, as the core keeps it
        for i in range(lo, min(rows, lo + batch)):
            _, evs = _events(i, now, rng)
            record, erows, nbytes = project(None, evs)
            ex_rows.append(new_record_row(record, nbytes))
            ev_rows.extend(erows)
            claimed, end = evs[1].at, evs[-1].at
            key = (int(end // 3600), charts.duration_bucket(end - claimed))
            took[key] = took.get(key, 0) + 1
        c.execute("BEGIN")
        c.executemany(INSERT_EXECUTION, ex_rows)  # the activity rollup: its triggers
        c.executemany(INSERT_EVENT, ev_rows)
        c.executemany(
            "INSERT INTO delivery_durations (hour, bucket, n) VALUES (?,?,?) ON CONFLICT "
            "(hour, bucket) DO UPDATE SET n = n + excluded.n",
            [(h, k, n) for (h, k), n in took.items()],
        )
        c.execute("COMMIT")
        print(
            f"  built {min(rows, lo + batch):,} executions ({time.perf_counter() - started:.0f}s)",
            file=sys.stderr,
        )
    c.execute("INSERT OR REPLACE INTO settings (key, value) VALUES ('last_gc_at', ?)", (repr(now),))
    slot = now - now % 3600  # a schedule's last SLOTS_KEPT hourly slots (its history's read)
    c.executemany(
        "INSERT INTO schedule_slots (name, slot, outcome, why, execution_id, at, count) "
        "VALUES ('hourly', ?, ?, NULL, ?, ?, 1)",
        [
            (slot - h * 3600, "late" if h % 7 == 3 else "fired", _id(rows - 1 - h), slot)
            for h in range(SLOTS_KEPT)
        ],
    )
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()


def home_for(rows: int, rebuild: bool) -> Path:
    home = RESULTS_DIR / f"ui-{rows}"
    db = home / "ys.db"
    ok = db.exists() and not rebuild and _schema(db) == len(MIGRATIONS)
    if not ok:
        shutil.rmtree(home, ignore_errors=True)
        (home / "workflows").mkdir(parents=True, mode=0o700)
        os.chmod(home, 0o700)
        print(f"building {rows:,} executions in {db} (once)", file=sys.stderr)
        build(db, rows)
    for wf in [*WORKFLOWS, RARE]:
        (home / "workflows" / f"{wf}.py").write_text(
            "import ys\n\n@ys.workflow\ndef main(step, params):\n    return 1\n"
        )
    logs = home / "logs" / "report%2F0000001"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "1.log").write_text("".join(f"line {n}: all is well\n" for n in range(2000)))
    return home


def _schema(db: Path) -> int:
    try:
        c = sqlite3.connect(db)
        return int(c.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0])
    except sqlite3.Error:
        return -1


class Daemon:
    """A daemon on the bench home (its DaemonHandle-like surface for UiSession)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.socket = home / "run" / "ys.sock"
        self.env = {
            **os.environ,
            "YS_HOME": str(home),
            "YS_WORKFLOWS": str(home / "workflows"),
            "YS_AUTOSTART": "0",
            "YS_RETENTION_DAYS": "100000",
            "YS_LOG_LEVEL": "WARNING",
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def client(self, **kw: Any) -> Any:
        from ys.client import Client

        return Client(str(self.socket), **kw)

    def __enter__(self) -> Daemon:
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
                self.client(timeout=2).version()
                return self
            except Exception:
                if self.proc.poll() is not None:
                    raise SystemExit("the daemon exited; see " + str(log.name)) from None
                time.sleep(0.1)
        raise SystemExit("the daemon did not answer in 120 s")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)


def pages(rows: int) -> list[tuple[str, str, bool]]:
    """(name, path, indexed): every page, and the executions page with each filter."""
    some = "report%2F0000001"
    return [
        ("now", "/ui/", True),
        ("executions", "/ui/executions", True),
        ("executions?status=failed", "/ui/executions?status=failed", True),
        ("executions?status=suspended", "/ui/executions?status=suspended", True),
        ("executions?prefix=report/00001", "/ui/executions?prefix=report%2F00001", True),
        ("executions?prefix=sync/", "/ui/executions?prefix=sync%2F", True),
        ("executions?since=1d", "/ui/executions?since=1d", True),
        ("executions page 2", "NEXT", True),
        ("executions?workflow=backup", "/ui/executions?workflow=backup", True),
        (f"executions?workflow={RARE}", f"/ui/executions?workflow={RARE}", True),
        ("execution", f"/ui/executions/{some}", True),
        ("schedules", "/ui/schedules", True),
        ("effects", "/ui/effects", True),
        ("values", "/ui/values", True),
        ("workflows", "/ui/workflows", True),
    ]


def measure(ui: UiSession, path: str, repeats: int) -> dict[str, Any]:
    ui.get(path)  # warm: the page's templates and its rows in the page cache
    server, wall = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        a = ui.get(path)
        wall.append((time.perf_counter() - t) * 1000)
        assert a.status == 200, (path, a.status, a.text[:300])
        server.append(float(a.header("Server-Timing").split("dur=")[1]))
    return {
        "server_ms": round(statistics.median(server), 1),
        "wall_ms": round(statistics.median(wall), 1),
        "runs": server,
    }


def charts_reads(db: Path, repeats: int) -> list[dict[str, Any]]:
    """Each picture's store read on its own (the store opened read-only, no daemon), as the
    pages make it: the median of `repeats` after a warm-up, in ms."""
    from ys.store.sqlite import SqliteStore
    from ys.ui.pages import HISTORY_SLOTS

    store = SqliteStore(db, read_only=True)
    t = time.time()
    day, hour = (t // 600 + 1) * 600, (t // 60 + 1) * 60
    hours = (t // 3600 + 1) * 3600
    reads = [
        ("activity, a day per 10 min (Now)", lambda: store.activity(day - DAY, day, 600.0)),
        ("activity, an hour per minute (Now, top)", lambda: store.activity(hour - 3600, hour, 60)),
        (
            "activity by workflow, a day per hour (Workflows)",
            lambda: store.activity_by_workflow(hours - DAY, hours, 3600.0),
        ),
        (
            "delivery durations, 24 hours (Now)",
            lambda: store.delivery_durations(hours - DAY, hours),
        ),
        (
            "a schedule's history (Schedules)",
            lambda: store.schedule_history("hourly", limit=HISTORY_SLOTS),
        ),
    ]
    out = []
    try:
        for name, read in reads:
            read()
            runs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                read()
                runs.append((time.perf_counter() - t0) * 1000)
            out.append({"read": name, "ms": round(statistics.median(runs), 2)})
            print(f"  {name}: {out[-1]['ms']} ms", file=sys.stderr)
    finally:
        store.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    home = home_for(args.rows, args.rebuild)
    results: list[dict[str, Any]] = []
    load = [load_average()]
    with Daemon(home) as d:
        ui = UiSession(d).sign_in()  # type: ignore[arg-type]
        for name, path, indexed in pages(args.rows):
            if path == "NEXT":
                import re

                first = ui.get("/ui/executions").text
                token = re.search(r"page_token=([\w-]+)", first)
                path = f"/ui/executions?page_token={token.group(1)}" if token else "/ui/executions"
            r = measure(ui, path, args.repeats)
            results.append({"page": name, "indexed": indexed, **r})
            print(f"  {name}: {r['server_ms']} ms", file=sys.stderr)
    reads = charts_reads(home / "ys.db", args.repeats)
    load.append(load_average())
    doc = {
        "rows": args.rows,
        "target_ms": TARGET_MS,
        "machine": machine_info(),
        "load_average": load,
        "pages": results,
        "chart_reads": reads,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(
        f"dashboard pages, {args.rows:,} executions, median of {args.repeats} "
        f"(server time from Server-Timing; wall = the whole request over the socket)"
    )
    print(f"{'page':<36} {'server ms':>10} {'wall ms':>9}  target {TARGET_MS:.0f} ms")
    for r in results:
        mark = "" if r["indexed"] else "  (no index serves this filter)"
        ok = "ok" if r["server_ms"] <= TARGET_MS else "OVER"
        print(f"{r['page']:<36} {r['server_ms']:>10.1f} {r['wall_ms']:>9.1f}  {ok}{mark}")
    print(f"{'chart read (store, no daemon)':<52} {'ms':>6}")
    for r in reads:
        ok = "ok" if r["ms"] <= TARGET_MS else "OVER"
        print(f"{r['read']:<52} {r['ms']:>6.2f}  {ok}")
    print(f"load average: {load[0]} -> {load[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
