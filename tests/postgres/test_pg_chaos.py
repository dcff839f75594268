"""Chaos on PostgreSQL (docs/design.md, "On PostgreSQL"): three daemons on one throw-away server, clients
triggering known IDs through all three, workflows with steps, a sleep, a child and an effect,
while a seeded random schedule SIGKILLs and SIGSTOPs daemons and workers, restarts the server
(`-m immediate`) and ends the daemons' connections (pg_terminate_backend). Then every daemon
runs again, the work drains, and the damage is counted: lost triggers, step bodies begun after
their step was recorded, children started twice, effects performed twice, executions not
finished, daemons dead or wedged. Every count must be 0.

The schedule is reproducible: YS_CHAOS_SEED=N runs the seed a failure names; YS_CHAOS_SECONDS
sets how long the faults go on (default 45 s, sized to a 2-core CI box).
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.pg_support import Databases, PgServer
from tests.postgres.test_pg_three_daemons import boxes
from tests.support import DaemonHandle, events, wait_until

pytestmark = pytest.mark.e2e

SECONDS = float(os.environ.get("YS_CHAOS_SECONDS", "45"))
CONCURRENCY = 3

# Each step body appends "<execution> <key> <attempt> start <time> <pid>" when it begins and
# "... end ..." when it ends; an effect's perform appends "<effect id>" to `effects` (the
# provider: `lookup` reads it back, so a perform is never repeated once it happened).
PARENT = """
import fcntl
import os
import time

import ys


def body(d, eid, key):
    line = f"{eid} {key} {os.environ.get('YS_ATTEMPT', '?')} %s {time.time():.6f} {os.getpid()}\\n"
    with open(d + "/steps", "a") as f:
        f.write(line % "start")
    time.sleep(0.15)
    with open(d + "/steps", "a") as f:
        f.write(line % "end")
    return key


def perform(d, effect_id):
    with open(d + "/effects", "a") as f:  # every call counts: a second one shows
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(effect_id + "\\n")
    return effect_id


def lookup(d, effect_id):
    try:
        with open(d + "/effects") as f:
            found = effect_id + "\\n" in f.read().splitlines(keepends=True)
    except FileNotFoundError:
        found = False
    return ys.Settled(effect_id) if found else ys.NotFound()


@ys.workflow
def main(step, params):
    d, eid = params["dir"], step.execution_id
    step.run("a", body, d, eid, "a")
    step.sleep("nap", 0.4)
    step.call("kid", "kid", {"dir": d})
    step.effect(
        "pay",
        effect_id="pay-" + eid,
        operation="pay.v1",
        input={},
        perform=lambda e: perform(d, e),
        lookup=lambda e: lookup(d, e),
        retry_in=1,
    )
    step.run("b", body, d, eid, "b")
    return eid
"""

KID = (
    PARENT.split("def perform")[0]
    + """
@ys.workflow
def main(step, params):
    step.run("k", body, params["dir"], step.execution_id, "k")
    return "kid"
"""
)


class Chaos:
    """The faults, on a thread of their own, chosen by `rng` until `stop` is set."""

    def __init__(
        self, rng: random.Random, hs: list[DaemonHandle], server: PgServer, url: str
    ) -> None:
        self.rng = rng
        self.hs = hs
        self.server = server
        self.url = url
        self.done: Counter[str] = Counter()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.stopped: set[int] = set()  # pids SIGSTOPped now
        self.timers: list[threading.Timer] = []  # their SIGCONTs to come
        self.restarts = 0

    def run(self) -> None:
        try:
            while not self.stop.wait(self.rng.uniform(0.5, 1.5)):
                self.once()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.resume_all()

    def once(self) -> None:
        kinds = [
            "kill_daemon",
            "stop_daemon",
            "kill_worker",
            "kill_worker",
            "stop_worker",
            "stop_worker",
            "terminate",
        ]
        if self.restarts < 2:
            kinds.append("restart")
        kind = self.rng.choice(kinds)
        h = self.rng.choice(self.hs)
        if kind == "kill_daemon":
            if h.proc.pid in self.stopped:
                self.cont(h.proc.pid)
            h.kill9()
            time.sleep(self.rng.uniform(0.2, 1.5))
            h.start(concurrency=CONCURRENCY)
        elif kind == "stop_daemon":
            self.pause(h.proc.pid, self.rng.uniform(0.5, 5.0))  # past its lease at times
        elif kind in ("kill_worker", "stop_worker"):
            workers = h.worker_pids()
            if not workers:
                return
            pid = self.rng.choice(sorted(workers))
            if kind == "kill_worker":
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    return
            else:
                self.pause(pid, self.rng.uniform(0.5, 5.0))
        elif kind == "restart":
            self.restarts += 1
            self.server.restart("immediate")
        elif kind == "terminate":
            import psycopg

            with psycopg.connect(self.server.url, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (self.url.rsplit("/", 1)[1].split("?")[0],),
                )
        self.done[kind] += 1

    def pause(self, pid: int, seconds: float) -> None:
        """SIGSTOP `pid` now and SIGCONT it `seconds` later (other faults go on meanwhile)."""
        if pid in self.stopped:
            return
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            return
        self.stopped.add(pid)
        timer = threading.Timer(seconds, self.cont, (pid,))
        timer.daemon = True
        timer.start()
        self.timers.append(timer)

    def cont(self, pid: int) -> None:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        self.stopped.discard(pid)

    def resume_all(self) -> None:
        for timer in self.timers:
            timer.cancel()
        for pid in list(self.stopped):
            self.cont(pid)


class Triggers:
    """Triggers known IDs, each through a box chosen by `rng`, until `stop`; an ID counts as
    acknowledged once a daemon answered its admission (a box that does not answer: the same
    ID through another, with use-existing)."""

    def __init__(self, rng: random.Random, hs: list[DaemonHandle], fx: Path) -> None:
        self.rng = rng
        self.hs = hs
        self.fx = fx
        self.acknowledged: list[str] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from ys.client import Client
        from ys.errors import DaemonUnavailable

        try:
            n = 0
            while not self.stop.wait(self.rng.uniform(0.1, 0.4)):
                eid = f"c{n:04}"
                n += 1
                deadline = time.monotonic() + 60
                while True:
                    h = self.rng.choice(self.hs)
                    try:
                        with Client(str(h.socket), timeout=5, autostart=False) as c:
                            c.trigger(
                                "parent",
                                {"dir": str(self.fx)},
                                execution_id=eid,
                                if_exists="use-existing",
                            )
                        break
                    except DaemonUnavailable:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)
                self.acknowledged.append(eid)
        except BaseException as exc:  # reported by the test
            self.error = exc


def _step_lines(fx: Path) -> list[list[str]]:
    try:
        text = (fx / "steps").read_text()
    except FileNotFoundError:
        return []
    return [ln.split() for ln in text.splitlines() if len(ln.split()) == 6]


def _recorded(history: list[dict[str, Any]]) -> dict[str, float]:
    """When each step of a history was recorded completed (the first time)."""
    from tests.support import parse_iso

    out: dict[str, float] = {}
    for e in history:
        data = e.get("data") or {}
        if e["kind"] == "step_completed" or (
            e["kind"].startswith("step") and data.get("status") == "completed"
        ):
            key = data.get("key") or data.get("step_key")
            if key is not None and key not in out:
                out[key] = parse_iso(e["at"])
    return out


def test_chaos_on_three_daemons_loses_and_doubles_nothing(tmp_path, pg_own_server: PgServer):
    seed = int(os.environ.get("YS_CHAOS_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"chaos seed {seed} (YS_CHAOS_SEED={seed} runs it again)")
    rng = random.Random(seed)
    url = Databases(pg_own_server.url).create()
    fx = tmp_path / "fx"
    fx.mkdir(mode=0o777)
    hs = boxes(tmp_path, url)
    started = time.monotonic()
    chaos = Chaos(random.Random(rng.random()), hs, pg_own_server, url)
    triggers = Triggers(random.Random(rng.random()), hs, fx)
    threads = [
        threading.Thread(target=chaos.run, name="chaos"),
        threading.Thread(target=triggers.run, name="triggers"),
    ]
    try:
        for h in hs:
            h.write("parent.py", PARENT)
            h.write("kid.py", KID)
            h.start(concurrency=CONCURRENCY)
        for t in threads:
            t.start()
        time.sleep(SECONDS)  # the faults' time (not a synchronisation: they run meanwhile)
        triggers.stop.set()
        chaos.stop.set()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), f"seed {seed}: a thread is stuck"
        assert triggers.error is None, f"seed {seed}: {triggers.error!r}"
        assert chaos.error is None, f"seed {seed}: {chaos.error!r}"
        chaos_end = time.monotonic()
        # every daemon runs and answers (none dead or wedged)
        for h in hs:
            if h.proc is None or h.proc.poll() is not None:
                h.start(concurrency=CONCURRENCY)
        wedged = []
        for i, h in enumerate(hs):
            t0 = time.monotonic()
            run = h.ys("daemon", "status", "--json", timeout=30)
            if run.returncode != 0 or time.monotonic() - t0 > 10:
                wedged.append(i)
        acknowledged = list(triggers.acknowledged)
        c = hs[0].client(timeout=30)

        def finished() -> bool:
            return all(c.get(eid)["status"] == "completed" for eid in acknowledged)

        try:
            wait_until(finished, timeout=150, interval=0.5, message="every execution to finish")
        except AssertionError:
            pass  # counted below
        drained = time.monotonic()
        lost, unfinished = [], []
        for eid in acknowledged:
            try:
                record = c.get(eid)
            except Exception:
                lost.append(eid)
                continue
            if record["status"] != "completed":
                unfinished.append((eid, record["status"]))
        # step bodies begun after their step was recorded
        lines = _step_lines(fx)
        starts: dict[tuple[str, str], list[float]] = defaultdict(list)
        for eid, key, _attempt, what, at, _pid in lines:
            if what == "start":
                starts[(eid, key)].append(float(at))
        recorded: dict[tuple[str, str], float] = {}
        kids = c.list(workflow="kid", limit=1000)["executions"]
        for eid in [*acknowledged, *(k["execution_id"] for k in kids)]:
            for key, at in _recorded(events(c, eid)).items():
                recorded[(eid, key)] = at
        late = [
            (eid, key, at, recorded[(eid, key)])
            for (eid, key), ats in starts.items()
            for at in ats
            if (eid, key) in recorded and at > recorded[(eid, key)]
        ]
        # children started twice: more than one child per parent
        parents = Counter((k.get("parent") or {}).get("execution_id") for k in kids)
        doubled_children = {p: n for p, n in parents.items() if n > 1}
        performs = Counter((fx / "effects").read_text().splitlines()) if acknowledged else {}
        doubled_effects = {e: n for e, n in performs.items() if n > 1}
        counts = {
            "acknowledged triggers": len(acknowledged),
            "lost triggers": len(lost),
            "step bodies begun after their step was recorded": len(late),
            "children started twice": len(doubled_children),
            "effects performed twice": len(doubled_effects),
            "executions not finished": len(unfinished),
            "daemons dead or wedged": len(wedged),
        }
        summary = (
            f"seed {seed}; faults {dict(chaos.done)}; step bodies run {len(starts)} keys, "
            f"{sum(len(v) for v in starts.values())} starts; chaos {chaos_end - started:.0f} s, "
            f"drain {drained - chaos_end:.0f} s; counts {json.dumps(counts)}"
        )
        print(summary)
        assert recorded, f"no step was recorded at all: {summary}"
        assert (
            counts["lost triggers"]
            + counts["step bodies begun after their step was recorded"]
            + counts["children started twice"]
            + counts["effects performed twice"]
            + counts["executions not finished"]
            + counts["daemons dead or wedged"]
            == 0
        ), f"{summary}\nlost {lost[:5]} late {late[:5]} children {doubled_children} " + (
            f"effects {doubled_effects} unfinished {unfinished[:5]} wedged {wedged}"
        )
        for h in hs:
            assert "failed in the dispatcher" not in h.log(), f"seed {seed}: {h.log()[-3000:]}"
    finally:
        triggers.stop.set()
        chaos.stop.set()
        for t in threads:
            if t.is_alive():
                t.join(60)
        chaos.resume_all()
        for h in hs:
            h.stop()
