"""Delivery latency and throughput: ys (a real daemon) next to DBOS 3.4 on SQLite, same run.

    .venv/bin/python bench/delivery.py [--quick] [--json] [--concurrency 4[,8...]] [--rounds R] [--keep]

Three measurements, each on both engines (see bench/README.md, section bench/delivery.py):

  first line   trigger (ys.Client.trigger / DBOS.start_workflow call start) -> time.time() taken
               by the workflow function's first statement; N sequential samples; p50 and p99
  zero         M zero-step workflows triggered in a loop, then all awaited; workflows/s
  steps        one execution running K step.run calls (each returns a small int): steps/s
               inside the workflow (first step start -> last step end, taken by the workflow
               and returned in its result) and end to end (trigger -> outcome seen)

ys runs as `python -m ys.daemon run --concurrency C` in a temporary YS_HOME under
bench/results/ (same disk as the DBOS files; never /tmp), always WAL + synchronous=FULL. DBOS
runs in bench/.venv-dbos (created once: venv + `pip install dbos==3.4.0`) through
bench/dbos_side.py, three times: DBOS's defaults (rollback journal), WAL + synchronous=NORMAL,
and WAL + synchronous=FULL, the durability ys has: every ratio is read against that one.

Targets, each printed as a ratio with PASS/FAIL on the last lines:
  steps/s in one execution >= 3x DBOS WAL+FULL; zero-step workflows/s >= 1x DBOS WAL+FULL;
  trigger -> first line p50 <= 3 ms and p99 <= 10 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import parallel_steps
from common import (
    BENCH_DIR,
    REPO_ROOT,
    filesystem_of,
    fmt_ratio,
    machine_info,
    progress,
    ratio,
    scratch_dir,
    table,
)

DBOS_VERSION = "3.4.0"
DBOS_VENV = BENCH_DIR / ".venv-dbos"
DBOS_PY = DBOS_VENV / "bin" / "python"
COMPILED_MARK = DBOS_VENV / ".ys-bench-compiled"
STEPS_TARGET = 3.0  # x DBOS WAL+FULL, steps/s inside one execution
ZERO_TARGET = 1.0  # x DBOS WAL+FULL, zero-step workflows/s
FIRST_P50_MS = 3.0
FIRST_P99_MS = 10.0
PAR_EXECUTIONS, PAR_K = 16, 50  # the "many executions at once" row
PEER = "dbos-wal-full"  # the durability-matched peer: WAL + synchronous=FULL, as ys


# -- environments ---------------------------------------------------------------------------


def _run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, text=True, capture_output=True, **kw)


def dbos_venv_version() -> str | None:
    if not DBOS_PY.exists():
        return None
    r = _run([str(DBOS_PY), "-c", "import importlib.metadata as m; print(m.version('dbos'))"])
    return r.stdout.strip() if r.returncode == 0 else None


def ensure_dbos_venv() -> dict[str, Any]:
    """bench/.venv-dbos with dbos==3.4.0, created once and byte-compiled once."""
    info: dict[str, Any] = {"path": str(DBOS_VENV), "created": False, "compiled_now": False}
    if dbos_venv_version() != DBOS_VERSION:
        if not DBOS_PY.exists():
            base = getattr(sys, "_base_executable", None) or shutil.which("python3") or "python3"
            progress(f"creating {DBOS_VENV} ({base} -m venv)")
            subprocess.run([base, "-m", "venv", str(DBOS_VENV)], check=True)
        progress(f"installing dbos=={DBOS_VERSION} into {DBOS_VENV}")
        subprocess.run(
            [str(DBOS_PY), "-m", "pip", "install", "-q", f"dbos=={DBOS_VERSION}"], check=True
        )
        COMPILED_MARK.unlink(missing_ok=True)
        info["created"] = True
    got = dbos_venv_version()
    if got != DBOS_VERSION:
        raise SystemExit(f"bench/.venv-dbos has dbos {got}, wanted {DBOS_VERSION}")
    if not COMPILED_MARK.exists():
        progress(f"byte-compiling {DBOS_VENV}")
        _run([str(DBOS_PY), "-m", "compileall", "-q", "-j", "0", str(DBOS_VENV / "lib")])
        COMPILED_MARK.write_text(f"{time.time()}\n")
        info["compiled_now"] = True
    r = _run([str(DBOS_PY), "-c", "import sys; print(sys.version.split()[0])"])
    info["python"] = r.stdout.strip()
    info["dbos"] = got
    return info


def compile_project() -> list[str]:
    """PYTHONDONTWRITEBYTECODE=1 is set on this machine, so every worker would compile ys and
    its imports from source at start-up; byte-compile them once (up-to-date files are skipped)."""
    import sysconfig

    targets = [sysconfig.get_paths()["purelib"], str(REPO_ROOT / "ys")]
    _run([sys.executable, "-m", "compileall", "-q", "-j", "0", *targets])
    return targets


def machine_load() -> dict[str, Any]:
    """Load average and CPU/IO pressure: this machine may be shared, and the figures move
    with it (DBOS's rollback journal pays several fsyncs per commit, so disk contention hurts
    it more than ys's one WAL fsync)."""
    out: dict[str, Any] = {"loadavg": os.getloadavg()}
    for kind in ("cpu", "io"):
        try:
            with open(f"/proc/pressure/{kind}") as f:
                first = f.readline().split()
            out[f"{kind}_some_avg10"] = float(first[1].split("=")[1])
        except (OSError, IndexError, ValueError):
            pass
    return out


def fmt_load(x: dict[str, Any]) -> str:
    la = ", ".join(f"{v:.2f}" for v in x["loadavg"])
    extra = "".join(
        f", {k.split('_')[0]} pressure {x[k]:.0f}%"
        for k in ("cpu_some_avg10", "io_some_avg10")
        if k in x
    )
    return f"load average {la}{extra}"


# -- statistics -----------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    xs = sorted(values)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def median(values: list[float]) -> float:
    return percentile(values, 50)


# -- the ys side ----------------------------------------------------------------------------


def workflow_sources(marks: Path) -> dict[str, str]:
    return {
        "first-line.py": f"""
            import time as _time
            _IMPORTED = _time.time()

            import ys

            MARKS = {str(marks.resolve())!r}


            @ys.workflow
            def main(step, params):
                t = _time.time()
                with open(MARKS, "a") as f:
                    f.write(f"{{step.execution_id}} {{t!r}} {{_IMPORTED!r}}\\n")
                return None
        """,
        "zero.py": """
            import ys


            @ys.workflow
            def main(step, params):
                return None
        """,
        "steps.py": """
            import time as _time

            import ys


            def _one(i):
                return i + 1


            @ys.workflow
            def main(step, params):
                k = params["k"]
                t0 = _time.time()
                total = 0
                for i in range(k):
                    total += step.run(f"s{i}", _one, i)
                t1 = _time.time()
                return {"t0": t0, "t1": t1, "total": total}
        """,
    }


class Daemon:
    """A real ys daemon in a private temporary home; stopped by PID (SIGTERM, then SIGKILL)."""

    def __init__(self, home: Path, concurrency: int) -> None:
        self.home = home
        self.workflows = home / "workflows"
        self.concurrency = concurrency
        self.proc: subprocess.Popen[bytes] | None = None
        self.env = dict(os.environ)
        for k in ("YS_SOCKET", "YS_DB", "YS_EXECUTION_ID", "YS_DELIVERY_TOKEN", "YS_WORKFLOW_FILE"):
            self.env.pop(k, None)
        self.env.update(YS_HOME=str(home), YS_WORKFLOWS=str(self.workflows), YS_AUTOSTART="0")

    @property
    def socket(self) -> Path:
        return self.home / "run" / "ys.sock"

    @property
    def db(self) -> Path:
        return self.home / "ys.db"

    def write_workflows(self, sources: dict[str, str]) -> None:
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.workflows.mkdir(mode=0o700, exist_ok=True)
        for name, src in sources.items():
            path = self.workflows / name
            path.write_text(textwrap.dedent(src).lstrip())
            os.chmod(path, 0o600)

    def client(self, timeout: float = 120.0) -> Any:
        from ys.client import Client

        return Client(str(self.socket), timeout=timeout)

    def start(self, names: list[str], timeout: float = 60.0) -> None:
        log = open(self.home / "daemon-bench.log", "ab")  # noqa: SIM115 - closed below
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ys.daemon", "run", "--concurrency", str(self.concurrency)],
                env=self.env,
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=str(REPO_ROOT),
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the daemon exited with {self.proc.returncode}: {self.log_tail()}"
                )
            try:
                with self.client(timeout=2) as c:
                    wfs = {w["name"]: w for w in c.workflows()["workflows"]}
                if all(n in wfs for n in names):
                    bad = {n: wfs[n]["error"] for n in names if wfs[n]["error"]}
                    if bad:
                        raise RuntimeError(f"workflow scripts do not load: {bad}")
                    return
            except RuntimeError:
                raise
            except Exception:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"the daemon did not answer in {timeout:.0f} s: {self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return (self.home / "daemon-bench.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self, deadline: float = 20.0) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        # workers run in their own process groups; kill any the daemon left behind, by PID
        workers = self.home / "run" / "workers"
        if workers.is_dir():
            for f in workers.iterdir():
                try:
                    os.killpg(int(f.name), signal.SIGKILL)
                except (ValueError, ProcessLookupError, PermissionError):
                    pass

    def journal_mode(self) -> str:
        conn = sqlite3.connect(self.db)
        try:
            return str(conn.execute("PRAGMA journal_mode").fetchone()[0]).upper()
        finally:
            conn.close()


def _outcome(record: dict[str, Any]) -> Any:
    if record["status"] != "completed":
        raise RuntimeError(
            f"{record['execution_id']} ended {record['status']}: {record.get('outcome')}"
        )
    return (record.get("outcome") or {}).get("result")


def _mark_of(marks: Path, eid: str) -> tuple[float, float]:
    for line in reversed(marks.read_text().splitlines()):
        parts = line.split()
        if parts and parts[0] == eid:
            return float(parts[1]), float(parts[2])
    raise RuntimeError(f"{eid} left no first-line mark in {marks}")


class YsSide:
    """The three measurements against a running daemon, through ys.Client."""

    name = "ys"

    def __init__(self, d: Daemon, marks: Path) -> None:
        self.d = d
        self.marks = marks
        self.c = d.client()

    def close(self) -> None:
        self.c.close()

    def warm_up(self) -> None:
        self.first(1)
        self.zero(1)
        self.steps(5)

    def first(self, n: int) -> dict[str, Any]:
        lat: list[float] = []
        to_import: list[float] = []
        trigger_calls: list[float] = []
        for _ in range(n):
            t0 = time.time()
            eid = self.c.trigger("first-line")["execution_id"]
            t_admitted = time.time()
            _outcome(self.c.wait(eid, timeout=120))
            t_first, t_imported = _mark_of(self.marks, eid)
            lat.append(t_first - t0)
            to_import.append(t_imported - t0)
            trigger_calls.append(t_admitted - t0)
        return {"samples": lat, "script_imported": to_import, "trigger_call": trigger_calls}

    def zero(self, m: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        ids = [self.c.trigger("zero")["execution_id"] for _ in range(m)]
        t_triggered = time.perf_counter()
        for eid in ids:
            _outcome(self.c.wait(eid, timeout=600))
        t1 = time.perf_counter()
        return {
            "n": m,
            "seconds": t1 - t0,
            "trigger_seconds": t_triggered - t0,
            "per_second": m / (t1 - t0),
        }

    def steps(self, k: int) -> dict[str, Any]:
        t0 = time.time()
        eid = self.c.trigger("steps", params={"k": k})["execution_id"]
        r = _outcome(self.c.wait(eid, timeout=600))
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


class DbosSide:
    """bench/dbos_side.py in bench/.venv-dbos: one DBOS configuration, driven line by line."""

    def __init__(self, scratch: Path, mode: str, url: str | None = None) -> None:
        """`url`: a PostgreSQL database for DBOS's system database (mode "postgres")."""
        self.name = f"dbos-{mode}"
        self.mode = mode
        self.db = scratch / f"dbos-{mode}.sqlite"
        self.log_path = scratch / f"dbos-{mode}.log"
        env = dict(os.environ)
        for k in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):
            env.pop(k, None)
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed below
        try:
            self.proc = subprocess.Popen(
                [
                    str(DBOS_PY),
                    str(BENCH_DIR / "dbos_side.py"),
                    *(["--url", url] if url else ["--db", str(self.db)]),
                    "--mode",
                    mode,
                ],
                env=env,
                cwd=str(scratch),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                bufsize=1,
            )
        finally:
            log.close()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"dbos_side.py ({self.mode}) exited: {self._log_tail()}")
        msg: dict[str, Any] = json.loads(line)
        if "error" in msg:
            raise RuntimeError(f"dbos_side.py ({self.mode}): {msg['error']}")
        return msg

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def call(self, cmd: str, **kw: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, **kw}) + "\n")
        self.proc.stdin.flush()
        res: dict[str, Any] = self._read()["ok"]
        return res

    def wait_ready(self) -> None:
        self._read()  # {"ready": true} after launch and warm-up

    def warm_up(self) -> None:
        pass  # done by dbos_side.py before it answers "ready"

    def first(self, n: int) -> dict[str, Any]:
        return self.call("first", n=n)

    def zero(self, m: int) -> dict[str, Any]:
        return self.call("zero", m=m)

    def steps(self, k: int) -> dict[str, Any]:
        return self.call("steps", k=k)

    def close(self, deadline: float = 20.0) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def _steps_summary(k: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "k": k,
        "runs": runs,
        "inside_per_second": median([r["inside_per_second"] for r in runs]),
        "e2e_per_second": median([r["e2e_per_second"] for r in runs]),
    }


def _zero_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"runs": runs, "per_second": median([r["per_second"] for r in runs])}


def interpreter_startup(repeats: int = 10) -> dict[str, float]:
    """Reference figures for what every ys delivery pays before workflow code: a fresh
    interpreter, and one that imports what `python -m ys.worker` imports."""
    out = {}
    for name, code in (
        ("python -c pass", "pass"),
        (
            "python -c 'import ys.worker.delivery, ys.client, ys.sdk'",
            "import ys.worker.delivery, ys.client, ys.sdk, ys.codec",
        ),
    ):
        xs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            xs.append(time.perf_counter() - t0)
        out[name] = median(xs)
    return out


def rotate(items: list[Any], i: int) -> list[Any]:
    j = i % len(items)
    return items[j:] + items[:j]


def measure(
    scratch: Path, concurrencies: list[int], n: int, m: int, k: int, repeats: int
) -> dict[str, Any]:
    """Start ys (first concurrency) and both DBOS configurations side by side, then run every
    measurement in interleaved rounds (the order rotates each round)."""
    conc = concurrencies[0]
    home = scratch / f"ys-c{conc}"
    marks = home / "first-line.marks"
    d = Daemon(home, conc)
    d.write_workflows(workflow_sources(marks))
    sides: list[Any] = []
    res: dict[str, Any] = {}
    try:
        progress(
            f"starting: ys daemon (concurrency {conc}) in {home}; DBOS default; "
            "DBOS WAL+NORMAL; DBOS WAL+FULL"
        )
        dd = DbosSide(scratch, "default")
        sides.append(dd)
        dw = DbosSide(scratch, "wal-normal")
        sides.append(dw)
        df = DbosSide(scratch, "wal-full")
        sides.append(df)
        d.start(["first-line", "zero", "steps"])
        ys = YsSide(d, marks)
        sides.insert(0, ys)
        ys.warm_up()
        dd.wait_ready()
        dw.wait_ready()
        df.wait_ready()
        engines: list[Any] = [ys, dd, dw, df]
        res = {
            e.name: {
                "first": [],
                "script_imported": [],
                "trigger_call": [],
                "zero": [],
                "steps": [],
            }
            for e in engines
        }
        progress(f"first line: {n} rounds")
        for i in range(n):
            for e in rotate(engines, i):
                r = e.first(1)
                res[e.name]["first"] += r["samples"]
                res[e.name]["script_imported"] += r.get("script_imported", [])
                res[e.name]["trigger_call"] += r.get("trigger_call", [])
        progress(f"steps: K={k}, {repeats} rounds")
        for i in range(repeats):
            for e in rotate(engines, i):
                res[e.name]["steps"].append(e.steps(k))
        progress(f"zero-step workflows: M={m}, {repeats} rounds")
        for i in range(repeats):
            for e in rotate(engines, i):
                res[e.name]["zero"].append(e.zero(m))
        for e in (dd, dw, df):
            res[e.name]["info"] = e.call("info")
        res["ys"]["journal_mode"] = d.journal_mode()
    finally:
        for s in sides:
            try:
                s.close()
            except Exception as exc:  # keep stopping the others
                progress(f"closing {s.name}: {exc}")
        d.stop()
    res["ys"]["zero_by_concurrency"] = {str(conc): _zero_summary(res["ys"]["zero"])}
    for extra in concurrencies[1:]:
        home = scratch / f"ys-c{extra}"
        d = Daemon(home, extra)
        d.write_workflows(workflow_sources(home / "first-line.marks"))
        try:
            progress(f"ys: zero-step workflows, M={m}, concurrency {extra}, {repeats} rounds")
            d.start(["first-line", "zero", "steps"])
            ys = YsSide(d, home / "first-line.marks")
            try:
                ys.warm_up()
                runs = [ys.zero(m) for _ in range(repeats)]
            finally:
                ys.close()
        finally:
            d.stop()
        res["ys"]["zero_by_concurrency"][str(extra)] = _zero_summary(runs)
    for name in ("ys", "dbos-default", "dbos-wal-normal", "dbos-wal-full"):
        r = res[name]
        r["steps"] = _steps_summary(k, r["steps"])
        r["zero"] = _zero_summary(r["zero"])
    return res


# -- report ---------------------------------------------------------------------------------


def summarize(res: dict[str, Any], concurrencies: list[int]) -> list[dict[str, Any]]:
    ys, dd, dw, df = (res["ys"], res["dbos-default"], res["dbos-wal-normal"], res["dbos-wal-full"])
    rows: list[dict[str, Any]] = []
    for p in (50, 99):
        rows.append(
            {
                "metric": f"trigger -> first line p{p} (ms, lower is better)",
                "kind": "latency",
                "ys": percentile(ys["first"], p) * 1000,
                "dbos_default": percentile(dd["first"], p) * 1000,
                "dbos_wal_normal": percentile(dw["first"], p) * 1000,
                "dbos_wal_full": percentile(df["first"], p) * 1000,
            }
        )
    for conc in concurrencies:
        rows.append(
            {
                "metric": f"zero-step workflows/s (ys concurrency {conc})",
                "kind": "rate",
                "ys": ys["zero_by_concurrency"][str(conc)]["per_second"],
                "dbos_default": dd["zero"]["per_second"],
                "dbos_wal_normal": dw["zero"]["per_second"],
                "dbos_wal_full": df["zero"]["per_second"],
            }
        )
    rows.append(
        {
            "metric": "steps/s inside one execution",
            "kind": "rate",
            "ys": ys["steps"]["inside_per_second"],
            "dbos_default": dd["steps"]["inside_per_second"],
            "dbos_wal_normal": dw["steps"]["inside_per_second"],
            "dbos_wal_full": df["steps"]["inside_per_second"],
        }
    )
    rows.append(
        {
            "metric": "steps/s end to end (trigger -> outcome)",
            "kind": "rate",
            "ys": ys["steps"]["e2e_per_second"],
            "dbos_default": dd["steps"]["e2e_per_second"],
            "dbos_wal_normal": dw["steps"]["e2e_per_second"],
            "dbos_wal_full": df["steps"]["e2e_per_second"],
        }
    )
    for r in rows:
        # a rate's ratio is ys / DBOS (above 1 is ys faster); a latency's is DBOS / ys, so
        # that above 1 means ys is faster there too
        for peer in ("dbos_default", "dbos_wal_normal", "dbos_wal_full"):
            a, b = (r["ys"], r[peer]) if r["kind"] == "rate" else (r[peer], r["ys"])
            r[f"ys_vs_{peer}"] = ratio(a, b)
    return rows


def targets(res: dict[str, Any], concurrencies: list[int]) -> list[dict[str, Any]]:
    """The delivery targets, each as a figure, what it needs and PASS/FAIL."""
    ys, df = res["ys"], res[PEER]
    steps = ratio(ys["steps"]["inside_per_second"], df["steps"]["inside_per_second"])
    zero = ratio(
        ys["zero_by_concurrency"][str(concurrencies[0])]["per_second"], df["zero"]["per_second"]
    )
    p50 = percentile(ys["first"], 50) * 1000
    p99 = percentile(ys["first"], 99) * 1000
    return [
        {
            "target": "steps/s in one execution vs DBOS WAL+FULL",
            "value": steps,
            "need": f">= {STEPS_TARGET:g}x",
            "pass": steps >= STEPS_TARGET,
            "shown": fmt_ratio(steps),
        },
        {
            "target": "zero-step workflows/s vs DBOS WAL+FULL",
            "value": zero,
            "need": f">= {ZERO_TARGET:g}x",
            "pass": zero >= ZERO_TARGET,
            "shown": fmt_ratio(zero),
        },
        {
            "target": "trigger -> first line p50",
            "value": p50,
            "need": f"<= {FIRST_P50_MS:g} ms",
            "pass": p50 <= FIRST_P50_MS,
            "shown": f"{p50:.1f} ms",
        },
        {
            "target": "trigger -> first line p99",
            "value": p99,
            "need": f"<= {FIRST_P99_MS:g} ms",
            "pass": p99 <= FIRST_P99_MS,
            "shown": f"{p99:.1f} ms",
        },
    ]


def fmt(v: float, kind: str) -> str:
    if kind == "latency":
        return f"{v:,.1f}"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument(
        "--concurrency",
        default="4",
        help="ys daemon --concurrency values, comma separated; the first runs every "
        "measurement, the others only zero-step workflows/s (default 4)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="rounds of the steps and zero-step measurements (default 3, quick 1)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = ap.parse_args()
    concurrencies = [int(x) for x in args.concurrency.split(",") if x.strip()]
    if args.quick:
        n, m, k, repeats = 10, 30, 100, 1
    else:
        n, m, k, repeats = 30, 100, 500, 3
    if args.rounds:
        repeats = args.rounds

    venv = ensure_dbos_venv()
    compiled = compile_project()
    with scratch_dir("delivery", keep=args.keep) as scratch:
        fs = filesystem_of(scratch)
        if fs.is_memory:
            progress(f"warning: {scratch} is on {fs.describe()}: fsync is free there")
        load_before = machine_load()
        res = measure(scratch, concurrencies, n, m, k, repeats)
        progress(f"steps of {PAR_EXECUTIONS} executions x {PAR_K} at once, {repeats} rounds")
        par = parallel_steps.measure(
            Daemon, workflow_sources, scratch, PAR_EXECUTIONS, PAR_K, repeats
        )
        startup = interpreter_startup(5 if args.quick else 10)
        load_after = machine_load()
    rows = summarize(res, concurrencies)
    ys, dd, dw, df = (res["ys"], res["dbos-default"], res["dbos-wal-normal"], res["dbos-wal-full"])
    goals = targets(res, concurrencies)
    doc = {
        "bench": "delivery",
        "machine": machine_info(),
        "load": {"before": load_before, "after": load_after},
        "scratch": str(scratch),
        "filesystem": fs.describe(),
        "settings": {
            "first_line_samples": n,
            "zero_workflows": m,
            "steps_k": k,
            "rounds": repeats,
            "ys_concurrency": concurrencies,
            "quick": args.quick,
            "pythondontwritebytecode": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        },
        "byte_compiled": {"dbos_venv": venv, "project": compiled},
        "ys_pragmas": {"journal_mode": ys["journal_mode"], "synchronous": "FULL"},
        "dbos_default_pragmas": dd["info"]["pragmas"],
        "dbos_wal_normal_pragmas": dw["info"]["pragmas"],
        "dbos_wal_full_pragmas": df["info"]["pragmas"],
        "results": res,
        "ys_interpreter_startup_seconds": startup,
        "rows": rows,
        "targets": goals,
        "parallel_steps": par,
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0

    mi = doc["machine"]
    di = dd["info"]
    print("ys delivery bench: trigger -> first line, zero-step workflows/s, steps/s")
    print(f"  python {mi['python']}, sqlite {mi['sqlite']}, {mi['cpus']} cpus, {mi['platform']}")
    print(f"  machine before: {fmt_load(load_before)}; after: {fmt_load(load_after)}")
    if max(load_before["loadavg"][0], load_after["loadavg"][0]) > (mi["cpus"] or 1):
        print("  note: the machine was busy with other work; figures are noisy")
    print(f"  scratch: {doc['scratch']} on {doc['filesystem']} (ys home and DBOS files alike)")
    print(
        f"  ys: daemon + warm launcher (one fork of a preloaded interpreter per delivery; YS_LAUNCHER=spawn for a fresh one); journal_mode={ys['journal_mode']}, "
        "synchronous=FULL (always)"
    )
    print(
        f"  DBOS {di['dbos_version']} (SQLAlchemy {di['sqlalchemy']}, python {di['python']}, "
        f"in-process library, own venv {DBOS_VENV.name})"
    )
    print(
        f"    default pragmas: journal_mode={di['pragmas']['journal_mode']}, "
        f"synchronous={di['pragmas']['synchronous']}; tuned: "
        f"journal_mode={dw['info']['pragmas']['journal_mode']}, "
        f"synchronous={dw['info']['pragmas']['synchronous']}; durability-matched: "
        f"journal_mode={df['info']['pragmas']['journal_mode']}, "
        f"synchronous={df['info']['pragmas']['synchronous']}"
    )
    print(
        f"  PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')}: "
        f"{DBOS_VENV.name} byte-compiled once, the project venv and ys/ byte-compiled "
        "(compileall) before the run, so worker start-up does not recompile"
    )
    print(
        f"  N={n} first-line samples per engine (p99 of {n} is about the maximum); "
        f"M={m} zero-step workflows x{repeats}; K={k} steps x{repeats}; rounds interleave "
        "the engines, rates are medians"
    )
    print()
    print("ratios: ys vs each DBOS (above 1x is ys faster; for latencies DBOS ms / ys ms)")
    headers = [
        "metric",
        "ys",
        "DBOS default",
        "DBOS WAL+NORMAL",
        "DBOS WAL+FULL",
        "vs default",
        "vs WAL+NORMAL",
        "vs WAL+FULL",
    ]
    body = [
        [
            r["metric"],
            fmt(r["ys"], r["kind"]),
            fmt(r["dbos_default"], r["kind"]),
            fmt(r["dbos_wal_normal"], r["kind"]),
            fmt(r["dbos_wal_full"], r["kind"]),
            fmt_ratio(r["ys_vs_dbos_default"]),
            fmt_ratio(r["ys_vs_dbos_wal_normal"]),
            fmt_ratio(r["ys_vs_dbos_wal_full"]),
        ]
        for r in rows
    ]
    print(table(headers, body))
    print()
    print(
        "ys first line, medians (ms after the trigger call starts): trigger call returns "
        f"{median(ys['trigger_call']) * 1000:.1f}, script module imported "
        f"{median(ys['script_imported']) * 1000:.1f}, first line "
        f"{median(ys['first']) * 1000:.1f}"
    )
    print(
        "ys worker start-up reference (median ms): "
        + ", ".join(f"{k_} {v * 1000:.1f}" for k_, v in startup.items())
    )

    def runs(side: dict[str, Any], what: str, key: str) -> str:
        return " ".join(f"{r[key]:,.0f}" for r in side[what]["runs"])

    print(
        f"steps/s inside, per round: ys {runs(ys, 'steps', 'inside_per_second')} | DBOS default "
        f"{runs(dd, 'steps', 'inside_per_second')} | DBOS WAL+NORMAL "
        f"{runs(dw, 'steps', 'inside_per_second')} | DBOS WAL+FULL "
        f"{runs(df, 'steps', 'inside_per_second')}"
    )
    print(
        f"zero-step workflows/s, per round: ys {runs(ys, 'zero', 'per_second')} | DBOS default "
        f"{runs(dd, 'zero', 'per_second')} | DBOS WAL+NORMAL {runs(dw, 'zero', 'per_second')}"
        f" | DBOS WAL+FULL {runs(df, 'zero', 'per_second')}"
    )
    print(
        f"steps/s, {par['executions']} executions x {par['k']} steps (daemon concurrency "
        f"{par['executions']}): {par['steps_per_second']:,.0f}; raw single-commit ceiling "
        f"{par['raw_commits_per_second']:,.0f} commits/s, same rounds; per round "
        + " ".join(f"{x['ratio']:.2f}x" for x in par["runs"])
    )
    print()
    for g in goals:
        print(f"{g['target']} {g['need']}: {'PASS' if g['pass'] else 'FAIL'} ({g['shown']})")
    print(
        f"steps/s, {par['executions']} executions vs the raw ceiling >= "
        f"{parallel_steps.TARGET:g}x: {'PASS' if par['pass'] else 'FAIL'} "
        f"({fmt_ratio(par['ratio'])})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
