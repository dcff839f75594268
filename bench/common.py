"""Small helpers shared by the benches in bench/: timing, medians, ratios, scratch dirs, tables.

Benches are plain scripts (`.venv/bin/python bench/<name>.py`); running one puts bench/ on
sys.path, so they import this module as `common`.
"""

from __future__ import annotations

import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
# git-ignored; scratch databases live here, not in /tmp (YS_BENCH_RESULTS: elsewhere, for tests)
RESULTS_DIR = Path(os.environ.get("YS_BENCH_RESULTS") or BENCH_DIR / "results")


# -- scratch space --------------------------------------------------------------------------


@contextmanager
def scratch_dir(prefix: str, keep: bool = False) -> Iterator[Path]:
    """A fresh directory under bench/results/ (same disk as the repo, never /tmp, which may be
    tmpfs and would make every fsync free). Removed afterwards unless `keep`."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix + "-", dir=RESULTS_DIR))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


@contextmanager
def postgres_databases(root: Path) -> Iterator[Any]:
    """A maker of fresh, empty PostgreSQL databases (tests.pg_support.Databases: `.create()`
    returns a URL): on a throw-away server with fsync on, as a real one, in a folder under
    `root`, or on YS_BENCH_POSTGRES_URL's server (its user must be allowed to CREATE
    DATABASE). Every database made is dropped, and the server stopped, afterwards."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))  # run as a script, only bench/ is on sys.path
    from tests.pg_support import Databases, PgServer, bin_dir

    server = None
    url = os.environ.get("YS_BENCH_POSTGRES_URL")
    if not url:
        binaries = bin_dir()
        if binaries is None:
            sys.exit("no PostgreSQL server binaries: apt-get install postgresql")
        os.chmod(root, 0o755)  # the server's user must reach its folder inside
        server = PgServer(binaries, base=root, durable=True).start()
        url = server.url
    dbs = Databases(url)
    try:
        yield dbs
    finally:
        try:
            dbs.drop_all()
        finally:
            if server is not None:
                server.stop()


def remove_db(path: Path) -> None:
    """Delete an SQLite file with its -wal and -shm companions."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass


@dataclass(frozen=True)
class Filesystem:
    path: str
    mount_point: str
    device: str
    fstype: str
    options: str

    @property
    def is_memory(self) -> bool:
        return self.fstype in ("tmpfs", "ramfs")

    def describe(self) -> str:
        return f"{self.fstype} ({self.device} mounted on {self.mount_point})"


def filesystem_of(path: str | os.PathLike[str]) -> Filesystem:
    """The mount a path lives on (longest matching mount point in /proc/self/mounts)."""
    real = os.path.realpath(path)
    best = Filesystem(real, "", "?", "unknown", "")
    try:
        with open("/proc/self/mounts", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 4:
                    continue
                device, mount, fstype, options = parts[:4]
                mount = mount.replace("\\040", " ")
                inside = real == mount or real.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best.mount_point):
                    best = Filesystem(real, mount, device, fstype, options)
    except OSError:
        pass
    return best


def load_average() -> list[float] | None:
    """1/5/15-minute load averages (other work on the machine skews every figure)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _proc_table() -> dict[int, tuple[int, int]]:
    """Linux /proc: pid -> (parent pid, CPU ticks of the process and of its reaped children)."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        # fields[1] ppid; [11] utime, [12] stime, [13] cutime, [14] cstime
        table[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    return table


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU seconds used so far by the processes `roots` and every descendant, alive or
    reaped (a reaped child's time is in its parent's). Two readings' difference is what the
    trees used between them: a child that ends meanwhile moves from its own count to its
    parent's, whole."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    seen: set[int] = set()
    todo = [r for r in roots if r in table]
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(children.get(pid, []))
    return sum(table[p][1] for p in seen) / os.sysconf("SC_CLK_TCK")


def postmaster_pids(root: Path) -> list[int]:
    """The throw-away PostgreSQL server's postmaster under `root` (the first line of its
    postmaster.pid): pg_ctl starts it detached, so it is no descendant of the bench."""
    for pidfile in root.rglob("postmaster.pid"):
        return [int(pidfile.read_text().split()[0])]
    return []


def machine_info() -> dict[str, Any]:
    return {
        "load_average_at_start": load_average(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "executable": sys.executable,
    }


# -- timing ---------------------------------------------------------------------------------


class Stopwatch:
    """Accumulates time only while running, so untimed setup can happen mid-measurement."""

    def __init__(self) -> None:
        self.elapsed = 0.0
        self._started: float | None = None

    def start(self) -> None:
        self._started = time.perf_counter()

    def stop(self) -> None:
        assert self._started is not None
        self.elapsed += time.perf_counter() - self._started
        self._started = None


@dataclass(frozen=True)
class Sample:
    ops: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0


def run_for(seconds: float, op: Callable[[int], object], start: int = 0) -> Sample:
    """Call op(start), op(start + 1), ... sequentially until `seconds` have passed."""
    i = start
    now = time.perf_counter
    began = now()
    deadline = began + seconds
    while now() < deadline:
        op(i)
        i += 1
    return Sample(i - start, now() - began)


def run_threads(
    threads: int,
    seconds: float,
    op: Callable[[int, int], bool | None],
    starts: list[int] | None = None,
) -> Sample:
    """K threads each call op(thread, i), i counting up from starts[thread] (default 0), until
    the shared deadline, or until op returns False (then extra["stopped"] is True).

    All threads start together (barrier); the sample's time runs from the start to the end of
    the last op to finish; extra["per_thread"] holds each thread's op count. An exception in
    any thread is re-raised here."""
    first = starts or [0] * threads
    counts = [0] * threads
    ends = [0.0] * threads
    stopped = [False] * threads
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads + 1)
    box: dict[str, float] = {}

    def worker(t: int) -> None:
        now = time.perf_counter
        barrier.wait()
        deadline = box["deadline"]
        i = first[t]
        try:
            while now() < deadline:
                if op(t, i) is False:
                    stopped[t] = True
                    break
                i += 1
        except BaseException as exc:  # noqa: B036 - reported by the caller
            errors.append(exc)
        counts[t] = i - first[t]
        ends[t] = now()

    pool = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(threads)]
    for th in pool:
        th.start()
    began = time.perf_counter()
    box["deadline"] = began + seconds
    barrier.wait()
    for th in pool:
        th.join()
    if errors:
        raise errors[0]
    extra = {"per_thread": counts, "stopped": any(stopped)}
    return Sample(sum(counts), max(ends) - began, extra)


class Workload(Protocol):
    """Something timed in slices: each run() continues where the previous one stopped."""

    def run(self, seconds: float) -> Sample: ...


@dataclass
class Tally:
    ops: int = 0
    seconds: float = 0.0
    slices: int = 0
    stopped: bool = False

    def add(self, s: Sample) -> None:
        self.ops += s.ops
        self.seconds += s.seconds
        self.slices += 1
        self.stopped = self.stopped or bool(s.extra.get("stopped"))

    def sample(self) -> Sample:
        return Sample(self.ops, self.seconds, {"slices": self.slices, "stopped": self.stopped})


def paired(
    subject: Workload,
    baseline: Workload,
    seconds: float,
    baseline_seconds: float,
    slice_seconds: float = 0.25,
) -> tuple[Sample, Sample]:
    """Run `subject` for `seconds` and `baseline` for `baseline_seconds`, alternating slices of
    about `slice_seconds` (starting with the baseline), so that both see the same machine:
    on a shared box a neighbour's burst of I/O lands in both instead of skewing one of them.
    A subject slice that reports extra["stopped"] (e.g. it ran out of work) ends the pairing.
    Returns (subject, baseline) totals."""
    slices = max(1, round(seconds / slice_seconds))
    a, b = Tally(), Tally()
    for _ in range(slices):
        b.add(baseline.run(baseline_seconds / slices))
        a.add(subject.run(seconds / slices))
        if a.stopped:
            break
    return a.sample(), b.sample()


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


# -- output ---------------------------------------------------------------------------------


def ratio(value: float, base: float) -> float:
    return value / base if base > 0 else 0.0


def fmt_rate(value: float) -> str:
    return f"{value:,.0f}"


def fmt_ratio(value: float) -> str:
    return f"{value:.2f}x"


def table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    """A plain-text table; columns in `right` are right-aligned (default: all but the first)."""
    right = set(range(1, len(headers))) if right is None else right
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        out = []
        for i, cell in enumerate(cells):
            out.append(str(cell).rjust(widths[i]) if i in right else str(cell).ljust(widths[i]))
        return "  ".join(out).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def progress(message: str) -> None:
    """A status line on stderr (keeps stdout clean for --json)."""
    print(message, file=sys.stderr, flush=True)
