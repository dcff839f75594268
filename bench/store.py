"""Store throughput at synchronous=FULL, next to the raw SQLite commit ceiling of the same disk.

    .venv/bin/python bench/store.py [--seconds N] [--repeats R] [--threads K] [--callers C]
                                    [--json] [--check]

Measures, each R times (round by round, median reported):

  raw ceiling    one `INSERT INTO t(v) VALUES (?)` per BEGIN IMMEDIATE..COMMIT, one thread,
                 WAL + synchronous=FULL, fresh file in bench/results/ (same disk as the store)
  direct mode    SqliteStore() (one transaction per call), one thread:
                 admissions/s, claim+ack cycles/s (2 transactions each), step writes/s
  group commit   SqliteStore(group_commit=True) driven by K threads (default 16):
                 the same three, plus a direct-mode K-thread admissions control row
  daemon path    SqliteStore(group_commit=True) as the daemon opens it, admit_async awaited
                 by C coroutines on one event loop (default 64; and a 16-coroutine row), as
                 the daemon's trigger handler awaits it for concurrent `ys trigger` calls

Each store measurement is paired with its own raw-ceiling run: short slices of the two
alternate, so that both see the same machine (this box is shared; a neighbour's fsync burst
must not land in one of them only). Ratios are store ops/s / raw commits/s of the same pair.
Target (issue): admissions/s >= 0.7x raw, on the daemon's path. Every admission is committed
(WAL, synchronous=FULL) before it is answered; the store gets there by sharing commits. One
commit per admission (direct mode) stays below it: an admission writes its record, its first
event and their index entries, several pages where the raw insert writes one. bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import (
    RESULTS_DIR,
    Sample,
    Stopwatch,
    Workload,
    filesystem_of,
    fmt_rate,
    fmt_ratio,
    load_average,
    machine_info,
    median,
    paired,
    progress,
    ratio,
    remove_db,
    run_for,
    run_threads,
    scratch_dir,
    table,
)

from ys.store.sql.events import encode_event_value
from ys.store.sql.executions import admit_tx
from ys.store.sqlite import SqliteStore
from ys.values import Outcome, StepWrite

TARGET = 0.7
RAW_SHARE = 0.5  # the paired raw run gets this fraction of --seconds
SLICE_SECONDS = 0.25  # store and raw alternate in slices of about this length
POOL_CHUNK = 2_000  # executions admitted per (untimed) setup transaction
LONG_LEASE = 3_600.0
NOISY_SPREAD = 2.0  # a paired raw ceiling this factor off the run's median flags the pair


# -- the raw ceiling --------------------------------------------------------------------------


class RawCommits:
    """One small INSERT per BEGIN IMMEDIATE..COMMIT on a fresh WAL file at synchronous=FULL."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        mode = self.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        assert str(mode).lower() == "wal", mode
        self.conn.execute("PRAGMA synchronous=FULL")
        assert self.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        self.conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        self.i = 0

    def run(self, seconds: float) -> Sample:
        execute = self.conn.execute

        def op(i: int) -> None:
            execute("BEGIN IMMEDIATE")
            execute("INSERT INTO t(v) VALUES (?)", (f"row {i}",))
            execute("COMMIT")

        s = run_for(seconds, op, start=self.i)
        self.i += s.ops
        return s

    def close(self) -> None:
        self.conn.close()


# -- setup helpers ----------------------------------------------------------------------------


def open_store(path: Path, group: bool) -> SqliteStore:
    return SqliteStore(path, group_commit=group, lease_seconds=LONG_LEASE)


def admit_pool(store: SqliteStore, count: int, start: int = 0) -> None:
    """Untimed setup: `count` runnable executions, admitted POOL_CHUNK per transaction through
    the store's own transaction body. Distinct admission times (so distinct due_at, as real
    admissions have), all in the past, oldest first."""
    base = time.time() - LONG_LEASE
    done = 0
    while done < count:
        n = min(POOL_CHUNK, count - done)
        first = start + done

        def tx(c: sqlite3.Connection, first: int = first, n: int = n) -> None:
            for i in range(first, first + n):
                params = encode_event_value({"n": i}, "params")
                admit_tx(
                    c,
                    workflow="bench",
                    params_json=params,
                    context_json="{}",
                    execution_id=None,
                    if_exists="fail",
                    parent=None,
                    at=base + i * 1e-6,
                )

        try:
            store.core.write(tx)
        except TypeError:  # admit_tx changed shape: fall back to the public API (slower)
            for i in range(first, first + n):
                store.admit("bench", {"n": i}, now=base + i * 1e-6)
        done += n


def commit_counter(store: SqliteStore) -> dict[str, int] | None:
    """Counts group-writer transactions (wraps Writer._commit on this instance); None if the
    writer is not in group mode or its internals changed."""
    writer = getattr(getattr(store, "core", None), "writer", None)
    inner = getattr(writer, "_commit", None)
    if writer is None or inner is None or not getattr(writer, "group", False):
        return None
    counter = {"commits": 0, "writes": 0}

    def counted(reqs: list[Any]) -> None:
        counter["commits"] += 1
        counter["writes"] += len(reqs)
        inner(reqs)

    writer._commit = counted
    return counter


# -- store workloads (each run() continues where the previous slice stopped) -------------------


class StoreWorkload:
    writes_per_op = 1

    def __init__(self, store: SqliteStore, threads: int) -> None:
        self.store = store
        self.threads = threads
        self.counter: dict[str, int] | None = None
        self.extra: dict[str, Any] = {}

    def start_counting(self) -> None:
        """Called once setup is done: only the timed writes are counted as commits."""
        self.counter = commit_counter(self.store)


class Admissions(StoreWorkload):
    """admit('bench', {'n': i}) without an execution ID; one thread, or K threads."""

    def __init__(self, store: SqliteStore, threads: int) -> None:
        super().__init__(store, threads)
        self.next = [0] * threads
        self.start_counting()

    def run(self, seconds: float) -> Sample:
        admit = self.store.admit
        if self.threads == 1:
            s = run_for(seconds, lambda i: admit("bench", {"n": i}), start=self.next[0])
            self.next[0] += s.ops
            return s
        k = self.threads

        def op(t: int, i: int) -> None:
            admit("bench", {"n": i * k + t})

        s = run_threads(k, seconds, op, starts=self.next)
        self.next = [a + b for a, b in zip(self.next, s.extra["per_thread"], strict=True)]
        return s


class AsyncAdmissions(StoreWorkload):
    """admit_async('bench', {'n': i}) from K coroutines on one event loop: the daemon's trigger
    path (the API handler awaits admit_async; the group writer answers the loop once per
    batch)."""

    def __init__(self, store: SqliteStore, callers: int) -> None:
        super().__init__(store, callers)
        self.loop = asyncio.new_event_loop()
        self.i = 0
        self.start_counting()

    def run(self, seconds: float) -> Sample:
        admit = self.store.admit_async
        now = time.perf_counter

        async def caller(deadline: float) -> float:
            while now() < deadline:
                n = self.i
                self.i += 1
                await admit("bench", {"n": n})
            return now()

        async def slice_() -> Sample:
            before = self.i
            began = now()
            ends = await asyncio.gather(*(caller(began + seconds) for _ in range(self.threads)))
            return Sample(self.i - before, max(ends) - began)

        return self.loop.run_until_complete(slice_())

    def close(self) -> None:
        self.loop.close()


class ClaimAck(StoreWorkload):
    """claim_due(now, limit=1) + acknowledge(completed): one cycle, two writes."""

    writes_per_op = 2

    def __init__(self, store: SqliteStore, threads: int, pool: int) -> None:
        super().__init__(store, threads)
        self.admitted = 0
        self.cycles = 0
        self.refills = 0
        self.pool = pool
        if threads > 1:  # threads cannot pause for a refill: one pool, sized generously
            self._refill(pool)
        self.start_counting()

    def _refill(self, n: int) -> None:
        admit_pool(self.store, n, start=self.admitted)
        self.admitted += n
        self.refills += 1
        self.extra = {"pool_admitted": self.admitted, "pool_refills": self.refills}

    def run(self, seconds: float) -> Sample:
        claim, ack = self.store.claim_due, self.store.acknowledge
        if self.threads == 1:
            watch = Stopwatch()
            now = time.perf_counter
            done = 0
            while watch.elapsed < seconds:
                if self.cycles == self.admitted:
                    self._refill(self.pool)  # untimed
                watch.start()
                deadline = now() + (seconds - watch.elapsed)
                while self.cycles < self.admitted and now() < deadline:
                    (d,) = claim(time.time(), limit=1)
                    ack(d.execution_id, d.token, Outcome("completed", self.cycles))
                    self.cycles += 1
                    done += 1
                watch.stop()
            return Sample(done, watch.elapsed)

        def op(t: int, i: int) -> bool:
            got = claim(time.time(), limit=1)
            if not got:  # the pool ran dry: stop (the sample covers the time actually run)
                self.extra["pool_ran_dry"] = True
                return False
            d = got[0]
            ack(d.execution_id, d.token, Outcome("completed", i))
            return True

        return run_threads(self.threads, seconds, op)


class StepWrites(StoreWorkload):
    """save_step(id, token, f"s{i}", StepWrite("run", "completed", "1")), each thread
    on its own claimed execution (long lease)."""

    def __init__(self, store: SqliteStore, threads: int) -> None:
        super().__init__(store, threads)
        for n in range(threads):
            store.admit("bench", {"n": n})
        self.deliveries = store.claim_due(time.time(), limit=threads, lease_seconds=LONG_LEASE)
        assert len(self.deliveries) == threads, self.deliveries
        self.next = [0] * threads
        self.start_counting()

    def run(self, seconds: float) -> Sample:
        save = self.store.save_step
        ds = self.deliveries

        def op(t: int, i: int) -> None:
            d = ds[t]
            save(d.execution_id, d.token, f"s{i}", StepWrite("run", "completed", "1"))

        if self.threads == 1:
            s = run_for(seconds, lambda i: op(0, i), start=self.next[0])
            self.next[0] += s.ops
            return s
        s = run_threads(self.threads, seconds, op, starts=self.next)
        self.next = [a + b for a, b in zip(self.next, s.extra["per_thread"], strict=True)]
        return s


# -- the measurements -------------------------------------------------------------------------


@dataclass
class Result:
    store: Sample
    raw: Sample
    extra: dict[str, Any]

    @property
    def ratio(self) -> float:
        return ratio(self.store.rate, self.raw.rate)


@dataclass
class Measurement:
    key: str
    label: str
    section: str  # "direct" | "group" | "daemon"
    group_commit: bool
    threads: int
    note: str
    make: Callable[[SqliteStore, int, dict[str, float]], StoreWorkload]
    results: list[Result] = field(default_factory=list)

    def measure(self, scratch: Path, tag: str, seconds: float, ctx: dict[str, float]) -> Result:
        store_path, raw_path = scratch / f"{self.key}-{tag}.db", scratch / f"raw-{tag}.db"
        store = open_store(store_path, self.group_commit)
        raw = RawCommits(raw_path)
        try:
            workload = self.make(store, self.threads, ctx)
            subject: Workload = workload  # type: ignore[assignment]
            try:
                s, r = paired(subject, raw, seconds, seconds * RAW_SHARE, SLICE_SECONDS)
            finally:
                close = getattr(workload, "close", None)
                if close is not None:
                    close()
            writes = s.ops * workload.writes_per_op
            # direct mode: one transaction per write, by construction
            commits = workload.counter["commits"] if workload.counter else writes
            extra = {
                **workload.extra,
                "writes": writes,
                "commits": commits,
                "slices": s.extra.get("slices"),
            }
            return Result(s, r, extra)
        finally:
            raw.close()
            store.close()
            remove_db(store_path)
            remove_db(raw_path)

    def median_result(self) -> Result:
        ordered = sorted(self.results, key=lambda r: r.ratio)
        return ordered[(len(ordered) - 1) // 2]


def _pool_size(seconds: float, ctx: dict[str, float]) -> int:
    # 4x what direct mode managed this round, capped by the raw ceiling (a cycle is two writes);
    # if it still runs dry the threads stop early and the sample covers only the time they ran.
    raw = ctx.get("raw_rate", 5_000.0)
    guess = 4 * ctx.get("claim_ack_rate", raw)
    return int(max(5_000, min(guess, raw * 1.2) * seconds))


def measurements(threads: int, callers: int, seconds: float) -> list[Measurement]:
    k = threads
    return [
        Measurement(
            "admissions",
            "admissions/s",
            "direct",
            False,
            1,
            "admit('bench', {'n': i}); 1 tx each",
            lambda st, t, ctx: Admissions(st, t),
        ),
        Measurement(
            "claim_ack",
            "claim+ack cycles/s",
            "direct",
            False,
            1,
            "claim_due(limit=1) + acknowledge; 2 tx per cycle",
            lambda st, t, ctx: ClaimAck(st, t, POOL_CHUNK * 2),
        ),
        Measurement(
            "step_writes",
            "step writes/s",
            "direct",
            False,
            1,
            "save_step on one claimed execution; 1 tx each",
            lambda st, t, ctx: StepWrites(st, t),
        ),
        Measurement(
            "group_admissions",
            "admissions/s",
            "group",
            True,
            k,
            f"{k} threads",
            lambda st, t, ctx: Admissions(st, t),
        ),
        Measurement(
            "group_claim_ack",
            "claim+ack cycles/s",
            "group",
            True,
            k,
            f"{k} threads; 2 writes per cycle",
            lambda st, t, ctx: ClaimAck(st, t, _pool_size(seconds, ctx)),
        ),
        Measurement(
            "group_step_writes",
            "step writes/s",
            "group",
            True,
            k,
            f"{k} threads, one execution each",
            lambda st, t, ctx: StepWrites(st, t),
        ),
        Measurement(
            "direct_threaded_admissions",
            "admissions/s (control)",
            "group",
            False,
            k,
            f"direct mode, {k} threads: concurrency without group commit",
            lambda st, t, ctx: Admissions(st, t),
        ),
        Measurement(
            "daemon_admissions",
            "admissions/s",
            "daemon",
            True,
            callers,
            f"admit_async from {callers} coroutines on one event loop",
            lambda st, t, ctx: AsyncAdmissions(st, t),
        ),
        Measurement(
            "daemon_admissions_16",
            "admissions/s",
            "daemon",
            True,
            16,
            "admit_async from 16 coroutines on one event loop",
            lambda st, t, ctx: AsyncAdmissions(st, t),
        ),
    ]


def run(seconds: float, repeats: int, threads: int, callers: int, keep: bool) -> dict[str, Any]:
    ms = measurements(threads, callers, seconds)
    machine = machine_info()
    with scratch_dir("store", keep=keep) as scratch:
        fs = filesystem_of(scratch)
        tmp_fs = filesystem_of("/tmp")
        if fs.is_memory:
            progress(
                f"WARNING: {scratch} is on {fs.fstype}; fsync is free there, figures are "
                "meaningless for a real disk"
            )
        for r in range(repeats):
            ctx: dict[str, float] = {}
            for m in ms:
                progress(f"round {r + 1}/{repeats}: {m.section} {m.label} ...")
                res = m.measure(scratch, f"{r}", seconds, ctx)
                m.results.append(res)
                ctx[f"{m.key}_rate"] = res.store.rate
                ctx["raw_rate"] = res.raw.rate
        scratch_text = str(scratch)

    raw_all = [res.raw.rate for m in ms for res in m.results]
    raw = median(raw_all)
    rows: list[dict[str, Any]] = []
    for m in ms:
        commit_rates = [ratio(res.extra["commits"], res.store.seconds) for res in m.results]
        per_commit = [ratio(res.extra["writes"], res.extra["commits"]) for res in m.results]
        rows.append(
            {
                "key": m.key,
                "label": m.label,
                "section": m.section,
                "writer_mode": "group_commit" if m.group_commit else "direct",
                "threads": m.threads,
                "note": m.note,
                "ops_per_s": median([res.store.rate for res in m.results]),
                "paired_raw_commits_per_s": median([res.raw.rate for res in m.results]),
                "ratio_to_raw": median([res.ratio for res in m.results]),
                "commits_per_s": median(commit_rates),
                "writes_per_commit": median(per_commit),
                "repeats": [
                    {
                        "ops": res.store.ops,
                        "seconds": round(res.store.seconds, 4),
                        "ops_per_s": res.store.rate,
                        "raw_commits": res.raw.ops,
                        "raw_seconds": round(res.raw.seconds, 4),
                        "raw_commits_per_s": res.raw.rate,
                        "ratio": res.ratio,
                        **res.extra,
                    }
                    for res in m.results
                ],
            }
        )
    admissions = next(r for r in rows if r["key"] == "admissions")
    group = next(r for r in rows if r["key"] == "group_admissions")
    daemon = next(r for r in rows if r["key"] == "daemon_admissions")
    load = machine.get("load_average_at_start") or [0.0]
    cpus = machine.get("cpus") or 1
    noise = []
    off = [
        f"{m.section} {m.label} #{n + 1}"
        for m in ms
        for n, res in enumerate(m.results)
        if not raw / NOISY_SPREAD <= res.raw.rate <= raw * NOISY_SPREAD
    ]
    if off:
        noise.append(
            f"the paired raw ceiling was more than {NOISY_SPREAD:g}x off its median in "
            f"{len(off)} of {len(raw_all)} pairs ({', '.join(off)}): the disk is shared "
            "and was busy then"
        )
    if load[0] > cpus:
        noise.append(f"load average {load[0]} > {cpus} cpus at the start")
    return {
        "bench": "store",
        "command": "python bench/store.py " + " ".join(sys.argv[1:]),
        "seconds_per_measurement": seconds,
        "raw_seconds_per_measurement": seconds * RAW_SHARE,
        "slice_seconds": SLICE_SECONDS,
        "repeats": repeats,
        "statistic": "median of repeats; ratio = median of per-repeat paired ratios",
        "threads": threads,
        "callers": callers,
        "machine": {**machine, "load_average_at_end": load_average()},
        "filesystem": {
            "scratch_dir": scratch_text,
            "type": fs.fstype,
            "device": fs.device,
            "mount_point": fs.mount_point,
            "tmp_type": tmp_fs.fstype,
        },
        "raw_ceiling": {
            "what": "one INSERT per BEGIN IMMEDIATE..COMMIT, WAL, synchronous=FULL, one thread",
            "commits_per_s": raw,
            "min": min(raw_all),
            "max": max(raw_all),
            "runs": len(raw_all),
        },
        "measurements": rows,
        "noisy": noise,
        "target": {
            "what": "admissions/s on the daemon's path (admit_async, group commit, "
            f"{callers} concurrent callers) >= 0.7x raw commit ceiling",
            "threshold": TARGET,
            "ratio": daemon["ratio_to_raw"],
            "pass": daemon["ratio_to_raw"] >= TARGET,
            "direct_ratio": admissions["ratio_to_raw"],
            "group_threads_ratio": group["ratio_to_raw"],
        },
    }


def render(doc: dict[str, Any]) -> str:
    fs = doc["filesystem"]
    rc = doc["raw_ceiling"]
    m = doc["machine"]
    out = [
        "ys store bench (WAL, synchronous=FULL)",
        f"  python {m['python']}, sqlite {m['sqlite']}, {m['cpus']} cpus, {m['platform']}",
        f"  load average (1/5/15 min): start {m['load_average_at_start']}, "
        f"end {m['load_average_at_end']}",
        f"  scratch files: {fs['scratch_dir']}",
        f"  filesystem: {fs['type']} ({fs['device']} on {fs['mount_point']}); "
        f"/tmp is {fs['tmp_type']} (not used)",
        f"  {doc['seconds_per_measurement']:g} s per measurement, each paired with "
        f"{doc['raw_seconds_per_measurement']:g} s of raw commits in alternating "
        f"~{doc['slice_seconds']:g} s slices; {doc['repeats']} repeats, medians reported",
        "",
        f"raw SQLite commit ceiling: {fmt_rate(rc['commits_per_s'])} commits/s "
        f"(median of {rc['runs']} paired runs, range {fmt_rate(rc['min'])}..{fmt_rate(rc['max'])})",
        "  one INSERT INTO t(v) VALUES (?) per BEGIN IMMEDIATE..COMMIT, one thread",
        "",
    ]
    headers = [
        "measurement",
        "ops/s",
        "raw/s (paired)",
        "vs raw",
        "ratios per repeat",
        "commits/s",
        "writes/commit",
        "notes",
    ]
    titles = {
        "direct": "direct mode (SqliteStore's default: one transaction per call), 1 thread",
        "group": f"group_commit=True, {doc['threads']} threads calling the sync API",
        "daemon": "the daemon's path: group_commit=True, admit_async from coroutines on one "
        "event loop",
    }
    for section in ("direct", "group", "daemon"):
        rows = []
        for r in doc["measurements"]:
            if r["section"] != section:
                continue
            rows.append(
                [
                    r["label"],
                    fmt_rate(r["ops_per_s"]),
                    fmt_rate(r["paired_raw_commits_per_s"]),
                    fmt_ratio(r["ratio_to_raw"]),
                    " ".join(fmt_ratio(x["ratio"]) for x in r["repeats"]),
                    fmt_rate(r["commits_per_s"]),
                    f"{r['writes_per_commit']:.1f}",
                    r["note"],
                ]
            )
        out.append(titles[section])
        out.append(table(headers, rows, right={1, 2, 3, 5, 6}))
        out.append("")
    for why in doc["noisy"]:
        out.append(f"NOISY RUN: {why}; those ratios are not comparable to a quiet run.")
    if doc["noisy"]:
        out.append("")
    t = doc["target"]
    out.append(
        f"admissions/s >= {t['threshold']}x raw: {'PASS' if t['pass'] else 'FAIL'} "
        f"({fmt_ratio(t['ratio'])} on the daemon's path with {doc['callers']} callers; "
        f"direct mode, 1 thread: {fmt_ratio(t['direct_ratio'])}; group commit with "
        f"{doc['threads']} threads: {fmt_ratio(t['group_threads_ratio'])})"
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement (3)")
    p.add_argument("--repeats", type=int, default=3, help="repeats; the median is reported (3)")
    p.add_argument("--threads", type=int, default=16, help="threads for the group section (16)")
    p.add_argument(
        "--callers", type=int, default=64, help="concurrent coroutines for the daemon section (64)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document instead")
    p.add_argument("--check", action="store_true", help="exit 1 if the target fails")
    p.add_argument("--keep", action="store_true", help=f"keep the scratch dir under {RESULTS_DIR}")
    args = p.parse_args(argv)
    if args.seconds <= 0 or args.repeats < 1 or args.threads < 1 or args.callers < 1:
        p.error("--seconds must be > 0, --repeats, --threads and --callers >= 1")
    doc = run(args.seconds, args.repeats, args.threads, args.callers, args.keep)
    print(json.dumps(doc, indent=2) if args.json else render(doc))
    return 1 if args.check and not doc["target"]["pass"] else 0


if __name__ == "__main__":
    sys.exit(main())
