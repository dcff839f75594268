"""The floor of ys's process model on this box: what the pieces every workflow needs cost
alone, with nothing of ys's own work in them.

    .venv/bin/python bench/floor.py [--n 500] [--no-postgres] [--json]

  trigger      one HTTP request over a Unix socket (a keep-alive connection, ys._http, as
               ys.Client sends it) to an idle asyncio server in another process answering a
               small JSON: with the daemon's server (aiohttp) and with a bare one (httptools
               on an asyncio.Protocol)
  delivery     a child forked ahead from a preloaded interpreter (the fork server's imports,
               gc frozen) that takes its channel, reads a launch line from it and os._exit()s:
               the fork, the launch write, the child's start and end, its reaping (and the
               wall from the launch's write to the child's end alone: the fork is made ahead)
  commit       one small INSERT and its commit, autocommit (one round trip), on a throw-away
               PostgreSQL server (fsync and synchronous_commit on, as bench/pg_side.py's) and
               on SQLite (WAL, synchronous=FULL, as ys's)

Per piece, N times one after the other: wall time per operation (p50, p99) and CPU per
operation of every process it involves (the bench's own, from time.process_time(); the
server's or fork server's tree and the PostgreSQL server's, from /proc). A workflow of ys
needs one trigger, one delivery and 2 commits at least (admission, outcome: docs/design.md,
"The store"); their sum is the least a zero-step workflow can cost within the contract (a
daemon behind a Unix socket, a process per delivery started through a warm launcher). Read it
against DBOS's figures in bench/README.md ("What limits the burst and the first line").
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from common import (
    REPO_ROOT,
    load_average,
    postgres_databases,
    postmaster_pids,
    progress,
    scratch_dir,
    table,
    tree_cpu_seconds,
)

# what a zero-step workflow's launch line is like (ys.daemon.launcher.Launch)
LAUNCH = {
    "execution_id": "01JZ0000000000000000000000",
    "attempt": 1,
    "workflow": "zero",
    "script": "/home/someone/workflows/zero.py",
    "lease_seconds": 30.0,
    "lease_since": 12345.678,
    "clock_offset": 0.0,
    "params": "{}",
    "context": "{}",
    "cancel_requested": False,
    "steps": [],
}

HTTP_SERVER = """
import asyncio, json, sys

async def main(path, kind):
    if kind == "aiohttp":
        from aiohttp import web

        async def handle(request):
            body = await request.json()
            return web.json_response({"execution_id": body["id"], "status": "admitted"})

        app = web.Application()
        app.router.add_post("/v1/trigger", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.UnixSite(runner, path).start()
    else:
        import httptools

        class Proto(asyncio.Protocol):
            def connection_made(self, transport):
                self.t, self.body = transport, []
                self.p = httptools.HttpRequestParser(self)

            def data_received(self, data):
                self.p.feed_data(data)

            def on_body(self, b):
                self.body.append(b)

            def on_message_complete(self):
                req = json.loads(b"".join(self.body))
                self.body = []
                out = json.dumps({"execution_id": req["id"], "status": "admitted"}).encode()
                self.t.write(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\n"
                             b"Content-Length: %d\\r\\n\\r\\n%s" % (len(out), out))

        await asyncio.get_running_loop().create_unix_server(Proto, path)
    print("ready", flush=True)
    await asyncio.Event().wait()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""

# A preloaded interpreter as the fork server is (its imports, gc frozen) that forks a child
# on each line from the bench, hands the bench the child's socket, reaps the child and says so.
FORK_SERVER = """
import gc, json, os, socket, sys
import ys.worker.forkserver  # noqa: F401 - everything the fork server preloads

link = socket.socket(fileno=int(sys.argv[1]))
gc.collect()
gc.freeze()
link.sendall(b"ready\\n")
while link.recv(1):
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        link.close()
        os.setsid()
        data = theirs.recv(65536)  # the launch line
        json.loads(data)
        os._exit(0)
    theirs.close()
    socket.send_fds(link, [b"s"], [ours.fileno()])
    ours.close()
    os.waitpid(pid, 0)
    link.sendall(b"x")
"""


def _summary(walls: list[float], cpu: dict[str, float], n: int) -> dict[str, Any]:
    walls = sorted(walls)
    return {
        "wall_p50_ms": statistics.median(walls) * 1e3,
        "wall_p99_ms": walls[min(len(walls) - 1, int(len(walls) * 0.99))] * 1e3,
        "cpu_ms": {k: v / n * 1e3 for k, v in cpu.items()},
        "cpu_total_ms": sum(cpu.values()) / n * 1e3,
    }


def _measure(
    n: int, op: Callable[[], None], others: dict[str, Callable[[], float]]
) -> dict[str, Any]:
    """`op` n times (after a few unmeasured ones), each timed; the CPU of this process and of
    each of `others` (a reading of seconds so far) over all n."""
    for _ in range(min(20, n)):
        op()
    before = {k: read() for k, read in others.items()}
    c0 = time.process_time()
    walls = []
    for _ in range(n):
        t0 = time.perf_counter()
        op()
        walls.append(time.perf_counter() - t0)
    cpu = {"bench": time.process_time() - c0}
    cpu.update({k: read() - before[k] for k, read in others.items()})
    return _summary(walls, cpu, n)


@contextmanager
def _child(argv: list[str], **kw: Any) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(argv, env=env, text=True, **kw)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def trigger(n: int, folder: Path, kind: str) -> dict[str, Any]:
    from ys._http import UnixHttp

    path = str(folder / f"{kind}.sock")
    server = [sys.executable, "-c", textwrap.dedent(HTTP_SERVER), path, kind]
    with _child(server, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        conn = UnixHttp(path, 10)
        body = json.dumps({"id": "01JZ0000000000000000000000", "params": {}}).encode()
        headers = {"Content-Type": "application/json"}

        def op() -> None:
            r = conn.exchange("POST", "/v1/trigger", body, headers)
            assert r.status == 200, r.status
            json.loads(r.body)

        try:
            return _measure(n, op, {"server": lambda: tree_cpu_seconds([proc.pid])})
        finally:
            conn.close()


def delivery(n: int) -> dict[str, Any]:
    ours, theirs = socket.socketpair()
    server = [sys.executable, "-c", textwrap.dedent(FORK_SERVER), str(theirs.fileno())]
    with _child(server, pass_fds=(theirs.fileno(),)) as proc:
        theirs.close()
        assert ours.recv(6) == b"ready\n"
        line = json.dumps(LAUNCH, separators=(",", ":")).encode() + b"\n"
        launches: list[float] = []

        def op() -> None:
            ours.sendall(b"f")  # fork a child: in ys, a spare forked ahead of the delivery
            _, fds, _, _ = socket.recv_fds(ours, 1, 1)
            with socket.socket(fileno=fds[0]) as channel:
                t0 = time.perf_counter()
                channel.sendall(line)
                assert ours.recv(1) == b"x"  # it ended and was reaped
                launches.append(time.perf_counter() - t0)

        try:
            out = _measure(n, op, {"fork server + child": lambda: tree_cpu_seconds([proc.pid])})
        finally:
            ours.close()
        # from the launch's write to the child's end: what a trigger waits for (the fork
        # is made ahead)
        out["launch_p50_ms"] = statistics.median(launches[-n:]) * 1e3
        return out


def pg_commit(n: int, folder: Path) -> dict[str, Any]:
    import psycopg

    with postgres_databases(folder) as dbs:
        url = dbs.create()
        pids = postmaster_pids(folder)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id bigserial PRIMARY KEY, v text NOT NULL)")
            value = json.dumps(LAUNCH)

            def op() -> None:
                conn.execute("INSERT INTO t (v) VALUES (%s)", (value,))

            others = {"postgres": lambda: tree_cpu_seconds(pids)} if pids else {}
            return _measure(n, op, others)


def sqlite_commit(n: int, folder: Path) -> dict[str, Any]:
    conn = sqlite3.connect(folder / "floor.db", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        value = json.dumps(LAUNCH)

        def op() -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (v) VALUES (?)", (value,))
            conn.execute("COMMIT")

        return _measure(n, op, {})
    finally:
        conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n", type=int, default=500, help="operations per piece")
    ap.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL commit")
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = ap.parse_args()
    load = load_average()
    out: dict[str, Any] = {}
    with ExitStack() as stack:
        folder = stack.enter_context(scratch_dir("floor"))
        progress("trigger (aiohttp)")
        out["trigger, aiohttp"] = trigger(args.n, folder, "aiohttp")
        progress("trigger (bare asyncio)")
        out["trigger, bare asyncio"] = trigger(args.n, folder, "bare")
        progress("delivery (fork, launch line, os._exit)")
        out["delivery"] = delivery(args.n)
        progress("SQLite commit")
        out["commit, SQLite"] = sqlite_commit(args.n, folder)
        if not args.no_postgres:
            progress("PostgreSQL commit")
            out["commit, PostgreSQL"] = pg_commit(args.n, folder)
    if args.json:
        print(json.dumps({"load_average": load, "n": args.n, "pieces": out}, indent=2))
        return 0
    launch = out["delivery"]["launch_p50_ms"]
    rows = []
    for name, m in out.items():
        parts = ", ".join(f"{k} {v:.2f}" for k, v in m["cpu_ms"].items())
        rows.append(
            [
                name,
                f"{m['wall_p50_ms']:.3f}",
                f"{m['wall_p99_ms']:.3f}",
                f"{m['cpu_total_ms']:.2f}",
                parts,
            ]
        )
    print(f"ys process-model floor, {args.n} each, load {load}")
    print(table(["piece", "p50 ms", "p99 ms", "CPU ms", "CPU by process (ms)"], rows, {1, 2, 3}))
    print(f"delivery, from the launch's write to the child's end: p50 {launch:.3f} ms")
    for db in ("SQLite", "PostgreSQL"):
        commit = out.get(f"commit, {db}")
        if commit is None:
            continue
        one = out["trigger, aiohttp"], out["delivery"]
        cpu = sum(m["cpu_total_ms"] for m in one) + 2 * commit["cpu_total_ms"]
        wall = one[0]["wall_p50_ms"] + one[1]["launch_p50_ms"] + commit["wall_p50_ms"]
        print(
            f"a zero-step workflow on {db}, at least: CPU {cpu:.2f} ms (a trigger, a delivery,"
            f" 2 commits); trigger to first line {wall:.2f} ms (a trigger, a commit, a launch"
            " to a child forked ahead)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
