"""Every benchmark in bench/ still runs: each ys (and tests) import it makes, at the top or
inside a function, names a module and a name that exist; and each bench that takes seconds at
its smallest sizes is run that way, start to end, in a scratch folder of the test's own
(YS_BENCH_RESULTS, removed after it). Those that need DBOS's virtualenv (delivery.py, dbos_side.py, and
parallel_steps.py, which delivery.py runs) are only checked for their imports."""

from __future__ import annotations

import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_support import bin_dir, unavailable
from tests.support import REPO

BENCH = REPO / "bench"

# the smallest run of each bench: each takes a few seconds
RUNS: dict[str, list[str]] = {
    "ab.py": [".", "--rounds", "1", "--k", "5", "--n", "2"],
    "cli.py": ["--runs", "1"],
    "idle.py": ["--seconds", "1"],
    "limits.py": ["--m", "5", "--rounds", "1", "--store-cycles", "20"],
    "keep.py": ["--executions", "200", "--seconds", "0.5"],
    "list_tags.py": ["--rows", "100", "--repeats", "1"],
    "metrics.py": ["--executions", "100", "--runs", "3"],
    "ps.py": ["--live", "100", "--repeats", "1"],
    "store.py": ["--seconds", "0.1", "--repeats", "1", "--threads", "2", "--callers", "2"],
    "triggers.py": ["--quick"],
    "ui.py": ["--rows", "100", "--repeats", "1"],
}
IMPORT_ONLY = {
    "common.py": "the benches' helpers",
    "delivery.py": "needs bench/.venv-dbos (DBOS)",
    "dbos_side.py": "runs inside bench/.venv-dbos",
    "pg_side.py": "needs bench/.venv-dbos (DBOS) and a PostgreSQL server",
    "pg_proxy.py": "pg_side.py's round-trip counter (test_the_proxy_counts_round_trips)",
    "parallel_steps.py": "run by delivery.py",
    "scaleout.py": "starts a PostgreSQL server and three sections: past this test's budget",
}
# a bench's other modes, each run at its smallest too
MORE_RUNS: list[tuple[str, list[str]]] = [("keep.py", ["--transfer", "--executions", "200"])]
# exits 1 when its target is missed, which a loaded machine may do: a verdict, not a failure
VERDICT_EXITS = {"cli.py": {0, 1}}


def test_every_bench_is_run_or_checked_for_its_imports():
    assert {p.name for p in BENCH.glob("*.py")} == set(RUNS) | set(IMPORT_ONLY)


def _project_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for every `import ys...`, `from ys... import name` (and tests...)
    anywhere in the file, functions included."""
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [(node.module, a.name) for a in node.names]
    return [(m, n) for m, n in out if m.split(".")[0] in ("ys", "tests")]


@pytest.mark.parametrize("name", sorted(set(RUNS) | set(IMPORT_ONLY)))
def test_what_a_bench_imports_from_ys_exists(name: str):
    imports = _project_imports(BENCH / name)
    for module, attr in imports:
        mod = importlib.import_module(module)  # ModuleNotFoundError names a moved module
        if attr is not None and not hasattr(mod, attr):
            importlib.import_module(f"{module}.{attr}")  # a submodule, or an error naming it


def test_every_bench_imports():
    """Each one's top-level imports, in a process of its own (bench/ first on sys.path, as
    when it is run); nothing runs (`__name__` is not `__main__`)."""
    names = sorted(n[:-3] for n in (*RUNS, *IMPORT_ONLY))
    code = (
        f"import importlib, sys, traceback; sys.path.insert(0, {str(BENCH)!r})\n"
        f"for name in {names!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        print(f'bench/{name}.py:', traceback.format_exc(limit=-1))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


@pytest.fixture
def results() -> Iterator[Path]:
    """The benches' scratch folder: one the `postgres` user can reach too (scaleout.py's
    server runs as that user when the tests run as root; pytest's tmp_path is private)."""
    path = Path(tempfile.mkdtemp(prefix="ys-bench-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _run_bench(name: str, argv: list[str], results: Path) -> str:
    """Runs bench/<name> with `argv` in `results`; its stdout, once it ended as it should."""
    env = {**os.environ, "YS_BENCH_RESULTS": str(results)}
    for k in ("YS_HOME", "YS_SOCKET", "YS_DB", "YS_DATABASE", "YS_BENCH_POSTGRES_URL"):
        env.pop(k, None)
    for k in ("COLUMNS", "LINES"):
        env.pop(k, None)
    r = subprocess.run(
        [sys.executable, str(BENCH / name), *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode in VERDICT_EXITS.get(name, {0}), (r.stdout[-2000:], r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.stdout.strip(), "the bench printed no results"
    return r.stdout


@pytest.mark.e2e
@pytest.mark.parametrize(
    "name, args",
    [(n, RUNS[n]) for n in sorted(RUNS)] + MORE_RUNS,
    ids=[*sorted(RUNS), *(f"{n} {' '.join(a)}" for n, a in MORE_RUNS)],
)
def test_a_bench_runs_at_its_smallest_sizes(name: str, args: list[str], results: Path):
    _run_bench(name, args, results)


@pytest.mark.e2e
def test_ab_runs_on_postgresql(results: Path):
    """bench/ab.py --postgres: a throw-away server, a database per daemon, the same figures;
    both daemons (the same tree twice) are reported, each under its own label."""
    if bin_dir() is None:
        unavailable("no PostgreSQL server binaries (initdb); apt-get install postgresql")
    out = _run_bench("ab.py", [".", "--postgres", "--rounds", "1", "--k", "5", "--n", "2"], results)
    assert out.startswith("ys A/B on postgresql"), out
    assert out.count("steps/s") == 2 and out.count("zero-step/s") == 2, out
    assert not [p for p in results.iterdir() if p.name.startswith("ab-")], "scratch left behind"


def test_the_proxy_counts_round_trips(pg_url: str):
    """bench/pg_proxy.py (pg_side.py's round trips per step): a statement is one turn, a
    pipelined batch with one sync is one, a notification the server sends unasked is none."""
    import psycopg

    sys.path.insert(0, str(BENCH))
    try:
        from pg_proxy import CountingProxy
    finally:
        sys.path.remove(str(BENCH))
    proxy = CountingProxy(pg_url)
    url = proxy.start()
    try:
        with psycopg.connect(url, autocommit=True) as conn, psycopg.connect(pg_url) as other:
            t0 = proxy.turns()
            for _ in range(3):
                conn.execute("SELECT 1").fetchone()
            assert proxy.turns() - t0 == 3
            t0 = proxy.turns()
            with conn.pipeline():
                cur = [conn.execute("SELECT %s::int", (i,)) for i in range(5)]
            assert [c.fetchone()[0] for c in cur] == list(range(5))
            assert proxy.turns() - t0 == 1
            conn.execute("LISTEN bench_proxy")
            t0 = proxy.turns()
            other.execute("NOTIFY bench_proxy, 'x'")
            other.commit()
            assert next(conn.notifies(timeout=10)).payload == "x"
            assert proxy.turns() - t0 == 0
    finally:
        proxy.close()


@pytest.mark.e2e
def test_pg_side_counts_round_trips_per_step(results: Path):
    """bench/pg_side.py --round-trips (no DBOS needed): a ys daemon on a throw-away server,
    every connection through the counting proxy, counted per step with its verdict (on a
    loaded machine, with few steps, the daemon's periodic work may make it FAIL: a verdict,
    not this test's failure); at least each step's save is counted (a request and its
    commit)."""
    if bin_dir() is None:
        unavailable("no PostgreSQL server binaries (initdb); apt-get install postgresql")
    out = _run_bench("pg_side.py", ["--round-trips", "--k", "40"], results)
    found = re.findall(
        r"^round trips per step <= 3 \(.*: (\d+)\): ([\d.]+) (PASS|FAIL)$", out, re.MULTILINE
    )
    assert len(found) == 1, out
    total, per_step, verdict = found[0]
    assert int(total) >= 2 * 40 and float(per_step) == pytest.approx(int(total) / 40, abs=0.01)
    assert verdict == ("PASS" if float(per_step) <= 3 else "FAIL")
    assert re.search(r"^round trips per zero-step workflow: \d", out, re.MULTILINE), out
    assert not [p for p in results.iterdir() if p.name.startswith("pg-side")], "scratch left"
