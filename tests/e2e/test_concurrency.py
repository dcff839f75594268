"""Concurrency limits through a real daemon (docs/design.md, "Workflow options" `concurrency`, `key`): each step
writes its start and end times (with its worker's pid) to a file; the test holds the steps on
a gate file while it counts who runs and who waits, SIGKILLs the daemon, restarts it, then
opens the gate and checks from the times that no more than the limit ever overlapped."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from e2e_support import fixture_dir, lines, wait_until

pytestmark = pytest.mark.e2e

WORK = """
import os
import pathlib
import time

import ys


def work(d, label):
    def note(what):
        with open(os.path.join(d, "effects"), "a") as f:
            f.write(f"{what} {label} {os.getpid()} {time.time():.6f}\\n")

    note("start")
    while not pathlib.Path(d, "go").exists():
        time.sleep(0.01)
    time.sleep(0.05)  # the workload: long enough for the next one to begin meanwhile
    note("end")
    return label


@ys.workflow(@OPTIONS@)
def main(step, params):
    return step.run("work", work, params["d"], params["label"])
"""

WAITING = "waiting for a concurrency slot"


def write_limited(daemon, name: str, options: str) -> None:
    daemon.write(f"{name}.py", WORK.replace("@OPTIONS@", options))


def starts(d: Path) -> list[str]:
    """The label of each step attempt that began, in order."""
    return [ln.split()[1] for ln in lines(d) if ln.startswith("start ")]


def most_at_once(d: Path, group=lambda label: "all") -> dict[str, int]:
    """Per group, the most step attempts that ran at the same time, from the attempts that
    ended (the ones killed with the daemon never wrote an end)."""
    began: dict[str, tuple[str, float]] = {}
    edges: list[tuple[float, int, str]] = []
    for ln in lines(d):
        what, label, pid, at = ln.split()
        if what == "start":
            began[pid] = (label, float(at))
        elif pid in began:
            label, t0 = began.pop(pid)
            edges += [(t0, 1, group(label)), (float(at), -1, group(label))]
    now: Counter[str] = Counter()
    most: Counter[str] = Counter()
    for _, step, g in sorted(edges):  # at one instant an end (-1) sorts before a start
        now[g] += step
        most[g] = max(most[g], now[g])
    return dict(most)


def waiting_ids(daemon) -> set[str]:
    with daemon.client() as c:
        return {r["execution_id"] for r in c.ps()["executions"] if r.get("waiting_for")}


def hold(daemon, d: Path, running: int, waiting: int, before: int = 0) -> list[str]:
    """Wait until `running` attempts began after the first `before` and `waiting` executions
    wait for a slot; return the labels that began. (`before` is counted by the caller before
    it triggers or restarts: a delivery may well begin before this is called.)"""
    wait_until(
        lambda: len(starts(d)) - before >= running and len(waiting_ids(daemon)) == waiting,
        timeout=30,
        message=f"{running} running and {waiting} waiting for a slot",
    )
    return starts(d)[before:]


def test_ten_executions_of_a_concurrency_2_workflow_never_overlap_more_than_two(ys_home, tmp_path):
    daemon = ys_home.start(concurrency=6)
    d = fixture_dir(tmp_path)
    write_limited(daemon, "limited", "concurrency=2")
    with daemon.client() as c:
        ids = [
            c.trigger("limited", {"d": str(d), "label": f"n{i}"}, execution_id=f"lim-{i}")[
                "execution_id"
            ]
            for i in range(10)
        ]
    first = hold(daemon, d, running=2, waiting=8)
    assert len(first) == 2 and len(starts(d)) == 2  # the daemon had room for 6

    # what people see of a waiting execution
    waiter = sorted(waiting_ids(daemon))[0]
    ps = daemon.ys("ps")
    assert ps.returncode == 0 and WAITING in ps.stdout, ps.stdout
    shown = daemon.ys("describe", waiter)
    assert WAITING in shown.stdout and "concurrency" in shown.stdout, shown.stdout
    described = json.loads(daemon.ys("describe", waiter, "--json").stdout)
    assert described["status"] == "admitted" and described["waiting_for"] == "a concurrency slot"
    assert described["waiting_on"] == [{"kind": "concurrency", "workflow": "limited", "slot": "*"}]

    daemon.kill9()  # both running workers die with the next daemon's start (orphans)
    before = len(starts(d))
    daemon.start(concurrency=6)
    again = hold(daemon, d, running=2, waiting=8, before=before)
    assert len(again) == 2 and len(starts(d)) == 4

    (d / "go").touch()
    with daemon.client() as c:
        done = [c.wait(i, timeout=60) for i in ids]
    assert [r["status"] for r in done] == ["completed"] * 10
    assert most_at_once(d) == {"all": 2}
    assert waiting_ids(daemon) == set()


def test_a_keyed_limit_runs_one_per_account_while_accounts_overlap(ys_home, tmp_path):
    daemon = ys_home.start(concurrency=6)
    d = fixture_dir(tmp_path)
    write_limited(daemon, "pay", 'concurrency=1, key="account"')
    accounts = ("acme", "globex", "initech")
    with daemon.client() as c:
        ids = [
            c.trigger("pay", {"d": str(d), "label": f"{a}/{i}", "account": a})["execution_id"]
            for a in accounts
            for i in range(3)
        ]
    first = hold(daemon, d, running=3, waiting=6)
    assert sorted(label.split("/")[0] for label in first) == list(accounts)  # one each, at once

    daemon.kill9()
    before = len(starts(d))
    daemon.start(concurrency=6)
    again = hold(daemon, d, running=3, waiting=6, before=before)
    assert sorted(label.split("/")[0] for label in again) == list(accounts)

    (d / "go").touch()
    with daemon.client() as c:
        assert {c.wait(i, timeout=60)["status"] for i in ids} == {"completed"}
    per_account = most_at_once(d, group=lambda label: label.split("/")[0])
    assert per_account == dict.fromkeys(accounts, 1)


def test_a_shell_header_sets_the_limit_and_a_bad_one_is_the_scripts_error(ys_home, tmp_path):
    daemon = ys_home  # its scripts are there before it starts: the registry lists them at once
    d = fixture_dir(tmp_path)
    daemon.write(
        "deploy",
        "#!/bin/sh\n# ys: concurrency=1 key=host\n"
        f'echo "start $YS_EXECUTION_ID" >> {d}/effects\n'
        f"while [ ! -e {d}/go ]; do sleep 0.01; done\n",
        mode=0o700,
    )
    daemon.write("broken", "#!/bin/sh\n# ys: concurrency=none\nexit 0\n", mode=0o700)
    daemon.start(concurrency=4)
    with daemon.client() as c:
        listed = {w["name"]: w for w in c.workflows()["workflows"]}
        assert (listed["deploy"]["concurrency"], listed["deploy"]["key"]) == (1, "host")
        assert "bad concurrency" in (listed["broken"]["error"] or "")
        for i, host in enumerate(("web1", "web1", "web2")):
            c.trigger("deploy", {"host": host}, execution_id=f"deploy-{i}")
    wait_until(
        lambda: len(lines(d)) == 2 and waiting_ids(daemon) == {"deploy-1"},
        timeout=30,
        message="one deploy per host",
    )
    assert sorted(lines(d)) == ["start deploy-0", "start deploy-2"]
    (d / "go").touch()
    with daemon.client() as c:
        assert c.wait("deploy-1", timeout=60)["status"] == "completed"


def test_cancelling_an_execution_that_waits_for_a_slot_ends_it_at_once(ys_home, tmp_path):
    daemon = ys_home.start(concurrency=4)
    d = fixture_dir(tmp_path)
    write_limited(daemon, "solo", "concurrency=1")
    with daemon.client() as c:
        for i in range(2):
            c.trigger("solo", {"d": str(d), "label": f"s{i}"}, execution_id=f"solo-{i}")
        hold(daemon, d, running=1, waiting=1)
        assert c.cancel("solo-1")["changed"] is True
        assert c.wait("solo-1", timeout=30)["status"] == "cancelled"
        assert c.get("solo-0")["status"] == "running"  # it kept the slot meanwhile
        assert starts(d) == ["s0"]  # solo-1 ran no code
        (d / "go").touch()
        assert c.wait("solo-0", timeout=60)["status"] == "completed"


def test_a_limit_raised_in_the_script_lets_the_waiting_run_at_once(ys_home, tmp_path):
    daemon = ys_home.start(concurrency=4)
    d = fixture_dir(tmp_path)
    write_limited(daemon, "grow", "concurrency=1")
    with daemon.client() as c:
        for i in range(3):
            c.trigger("grow", {"d": str(d), "label": f"g{i}"}, execution_id=f"grow-{i}")
    hold(daemon, d, running=1, waiting=2)
    write_limited(daemon, "grow", "concurrency=3")  # read at each claim: the queued ones too
    wait_until(
        lambda: len(starts(d)) == 3 and not waiting_ids(daemon),
        timeout=30,
        message="all three running under the raised limit",
    )
    (d / "go").touch()
    with daemon.client() as c:
        assert {c.wait(f"grow-{i}", timeout=60)["status"] for i in range(3)} == {"completed"}
