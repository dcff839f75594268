"""CLI start-up: median wall time of `ys` commands against a warm daemon, as ratios to
`python -c pass` measured in the same run (target: `ys get ID --json` and `ys --version`
within 6x). The "no fast path" rows run the same commands through typer (YS_NO_FAST_PATH=1).

    .venv/bin/python bench/cli.py [--runs N] [--json]

It byte-compiles the venv and ys/ first (`python -m compileall -q`): this machine sets
PYTHONDONTWRITEBYTECODE=1, so without .pyc files every run would recompile its imports and the
figures would measure the compiler. Commands run round-robin (one of each per round) so drift
in the machine's load hits every case alike. It also times `import typer` and, when it is
installed, `import pydantic` (what typer>=0.26 adds at run time) to record why typer is pinned
below 0.26.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import common

PY = sys.executable
YS = str(Path(PY).with_name("ys"))
TARGET = 6.0


def compile_all() -> None:
    venv_lib = Path(sys.prefix) / "lib"
    for target in (venv_lib, common.REPO_ROOT / "ys"):
        subprocess.run(
            [PY, "-m", "compileall", "-q", str(target)],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def start_daemon(env: dict[str, str], home: Path) -> subprocess.Popen[bytes]:
    log = open(home / "daemon.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [PY, "-m", "ys.daemon", "run"],
        env=env,
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if (
            subprocess.run(
                [YS, "daemon", "status", "--json"], env=env, capture_output=True
            ).returncode
            == 0
        ):
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit("the daemon did not start: " + (home / "daemon.log").read_text()[-2000:])


def timed(argv: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{argv} exited {r.returncode}: {r.stderr.decode()[-500:]}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=30, help="rounds (one run of each case each)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()

    common.progress("byte-compiling the venv and ys/ (PYTHONDONTWRITEBYTECODE is set here)")
    compile_all()
    with common.scratch_dir("cli") as home:
        env = dict(
            os.environ,
            YS_HOME=str(home),
            YS_AUTOSTART="0",
            YS_WORKFLOWS=str(common.REPO_ROOT / "examples" / "workflows"),
        )
        for k in ("YS_SOCKET", "YS_DB"):
            env.pop(k, None)
        slow = dict(env, YS_NO_FAST_PATH="1")
        proc = start_daemon(env, home)
        try:
            eid = subprocess.run(
                [YS, "trigger", "hello", "--wait"],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            cases: list[tuple[str, list[str], dict[str, str], float | None]] = [
                ("python -c pass", [PY, "-c", "pass"], env, None),
                ("ys --version", [YS, "--version"], env, TARGET),
                ("ys get ID --json", [YS, "get", eid, "--json"], env, TARGET),
                ("ys trigger hello", [YS, "trigger", "hello"], env, None),
                ("ys get ID (people)", [YS, "get", eid], env, None),
                ("ys get ID --json, no fast path", [YS, "get", eid, "--json"], slow, None),
                ("ys --version, no fast path", [YS, "--version"], slow, None),
                ("ys trigger hello, no fast path", [YS, "trigger", "hello"], slow, None),
                ("python -c 'import typer'", [PY, "-c", "import typer"], env, None),
            ]
            if subprocess.run([PY, "-c", "import pydantic"], capture_output=True).returncode == 0:
                cases.append(
                    ("python -c 'import pydantic'", [PY, "-c", "import pydantic"], env, None)
                )
            for _, argv, e, _ in cases:  # warm the page cache
                timed(argv, e)
            samples: dict[str, list[float]] = {name: [] for name, *_ in cases}
            for _ in range(args.runs):
                for name, argv, e, _ in cases:
                    samples[name].append(timed(argv, e))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)

    base = common.median(samples["python -c pass"])
    results = []
    for name, _, _, target in cases:
        med = common.median(samples[name])
        ratio = common.ratio(med, base)
        results.append(
            {
                "case": name,
                "median_ms": round(med * 1000, 1),
                "ratio": round(ratio, 2),
                "target": target,
                "ok": None if target is None else ratio <= target,
            }
        )
    if args.json:
        print(
            json.dumps(
                {"machine": common.machine_info(), "runs": args.runs, "results": results}, indent=2
            )
        )
    else:
        print(
            f"CLI start-up, median of {args.runs} runs each, against a warm daemon "
            f"(bytecode compiled first)"
        )
        rows = [
            [
                r["case"],
                f"{r['median_ms']:.1f}",
                common.fmt_ratio(r["ratio"]),
                "" if r["target"] is None else f"<= {r['target']:g}x",
                "" if r["ok"] is None else ("ok" if r["ok"] else "MISSED"),
            ]
            for r in results
        ]
        print(common.table(["case", "median ms", "ratio", "target", ""], rows))
    return 0 if all(r["ok"] is not False for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
