"""Concurrency limits with several daemons on one PostgreSQL database: three stores (each its
own writer, pool and lease holder) claiming at once, and two real daemons sharing the work of
one limited workflow. Each test asserts an invariant (the most leases or runs of one group at
once), never a time."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from tests.support import T0, DaemonHandle, Threads, lines, make_home, wait_until
from ys.outcomes import outcome_of
from ys.store.base import ScriptOptions

LEASE = 30.0
DONE = {"status": "completed", "result": None}


def test_three_daemons_claiming_at_once_hold_at_most_one_lease_per_account(daemons):
    stores = daemons(3, group_commit=True)
    accounts = ("acme", "globex")
    for i in range(24):
        stores[i % 3].admit("pay", {"account": accounts[i % 2]}, execution_id=f"pay-{i:02}")
    stores[0].set_script("pay", "0" * 64, options=ScriptOptions(1, key="account"))
    lock = threading.Lock()
    held: Counter[str] = Counter()
    most: Counter[str] = Counter()
    done: list[str] = []

    def account(execution_id: str) -> str:
        return accounts[int(execution_id.rsplit("-", 1)[1]) % 2]

    def drain(i: int) -> None:
        deadline = time.monotonic() + 60
        while len(done) < 24 and time.monotonic() < deadline:
            batch = stores[i].claim_due(now=T0, limit=2, lease_seconds=LEASE)
            with lock:  # counted after the claim committed, uncounted before the outcome
                for d in batch:
                    held[account(d.execution_id)] += 1
                    most[account(d.execution_id)] = max(
                        most[account(d.execution_id)], held[account(d.execution_id)]
                    )
            for d in batch:
                with lock:
                    held[account(d.execution_id)] -= 1
                stores[i].acknowledge(d.execution_id, d.token, outcome_of(DONE))
                with lock:
                    done.append(d.execution_id)

    results = Threads(3, drain).results()
    assert all(r is None for r in results), results
    assert sorted(done) == [f"pay-{i:02}" for i in range(24)]  # each once
    assert dict(most) == dict.fromkeys(accounts, 1)


LIMITED = """
import os
import pathlib
import time

import ys


def work(d, label):
    def note(what):
        with open(os.path.join(d, "effects"), "a") as f:
            f.write(f"{what} {label} {time.time():.6f}\\n")

    note("start")
    while not pathlib.Path(d, "go").exists():
        time.sleep(0.01)
    time.sleep(0.05)
    note("end")


@ys.workflow(concurrency=2)
def main(step, params):
    step.run("work", work, params["d"], params["label"])
"""


def most_at_once(d: Path) -> int:
    edges = []
    for ln in lines(d):
        what, _, at = ln.split()
        edges.append((float(at), 1 if what == "start" else -1))
    now = most = 0
    for _, step in sorted(edges):  # at one instant an end (-1) sorts before a start
        now += step
        most = max(most, now)
    return most


def test_two_daemons_on_one_database_run_at_most_the_limit_between_them(tmp_path, pg_url):
    d = tmp_path / "fx"
    d.mkdir()
    hs: list[DaemonHandle] = []
    for i in range(2):
        (tmp_path / f"box{i}").mkdir()
        hs.append(make_home(tmp_path / f"box{i}", YS_DATABASE=pg_url))
    try:
        for h in hs:
            h.write("limited.py", LIMITED)
            h.start(concurrency=4)
        for i in range(8):
            with hs[i % 2].client() as c:
                c.trigger("limited", {"d": str(d), "label": f"n{i}"}, execution_id=f"n{i}")

        def waiting() -> set[str]:
            with hs[1].client() as c:
                ps = c.ps()["executions"]
            return {r["execution_id"] for r in ps if r.get("waiting_for")}

        wait_until(
            lambda: sum(ln.startswith("start") for ln in lines(d)) == 2 and len(waiting()) == 6,
            timeout=30,
            message="2 running on the two daemons, 6 waiting for a slot",
        )
        (d / "go").touch()
        with hs[0].client() as c:
            assert {c.wait(f"n{i}", timeout=60)["status"] for i in range(8)} == {"completed"}
        assert sum(ln.startswith("end") for ln in lines(d)) == 8
        assert most_at_once(d) == 2
    finally:
        for h in hs:
            h.stop()


def test_recovery_frees_only_the_slots_its_own_workers_kept(daemons):
    """A daemon's recovery knows only its own workers gone: a slot another daemon's worker
    keeps (its execution cancelled at once) stays held until that daemon frees it."""
    one, two = daemons(2)
    one.set_script("job", "0" * 64, now=T0, options=ScriptOptions(concurrency=2))
    for eid in ("a", "b", "c"):
        one.admit("job", {}, execution_id=eid, now=T0)
    [a] = one.claim_due(now=T0, limit=1, lease_seconds=LEASE)
    [b] = two.claim_due(now=T0, limit=1, lease_seconds=LEASE)
    assert one.cancel(a.execution_id, now=T0 + 1, at_once=True)
    assert two.cancel(b.execution_id, now=T0 + 1, at_once=True)
    assert one.claim_due(now=T0 + 2, limit=1, lease_seconds=LEASE) == []  # both kept
    two.release_held(now=T0 + 3)  # d1 restarted: its worker (b's) is gone, d0's may run
    [c] = one.claim_due(now=T0 + 4, limit=2, lease_seconds=LEASE)
    assert c.execution_id == "c"
    assert two.free_slot(b.execution_id) is False  # freed by the recovery
    assert one.free_slot(a.execution_id) is True  # still kept until d0 says so
