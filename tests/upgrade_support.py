"""Databases written by earlier released states of ys, for the upgrade tests
(tests/e2e/test_upgrades.py: SQLite; tests/postgres/test_pg_upgrades.py: PostgreSQL).

Each earlier state (a commit) is taken out of git history into a temp folder and given a venv
of its own whose path holds that source and this venv's installed dependencies (a .pth file:
no network, no build, so it takes a second; the old code imports nothing newer). That ys's own
daemon and CLI write a database with executions in every status a stopped daemon leaves
(completed, failed, cancelled, sleeping, waiting on a value), values, a settled effect and a
schedule (`write_with`); `snapshot` is what a CLI shows of them, `same` compares two.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import sysconfig
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import DaemonHandle, claimed, kinds, make_home, parse_iso, wait_until

REPO = Path(__file__).resolve().parents[1]

WORKFLOWS = {
    "hello.py": """
import ys

@ys.workflow
def main(step, params):
    return {"greeting": step.run("greet", lambda: "hello")}
""",
    "boom.py": """
import ys

@ys.workflow
def main(step, params):
    step.run("first", lambda: 1)
    raise ValueError("boom")
""",
    "nap.py": """
import os
import time

import ys

GO = {go!r}

@ys.workflow
def main(step, params):
    before = step.run("before", lambda: "b")
    # until a far-off time, past the test; a sleep keeps its recorded wake on every replay
    # (`ys wake` only delivers it again), so the test ends this one by creating GO first
    if not os.path.exists(GO):
        step.sleep("nap", max(0.0, params["until"] - time.time()))
    return {"before": before, "after": step.run("after", lambda: "a")}
""",
    "waiter.py": """
import ys

@ys.workflow
def main(step, params):
    got = step.wait_for("approval", params["key"])
    return {"got": got}
""",
    "pay.py": """
import ys

@ys.workflow
def main(step, params):
    return step.effect(
        "charge",
        effect_id=params["eid"],
        operation="charge",
        input={"amount": 5},
        perform=lambda eid: {"paid": eid},
        lookup=lambda eid: None,
    )
""",
}
# sleep-1's wake: far past the test, whatever the load (its old part takes 12 s on a quiet box,
# over a minute on a loaded one); today's ys ends it through nap.py's GO file, not the clock
NAP_UNTIL = 4102444000
IDS = ["done-1", "failed-1", "sleep-1", "cancel-1", "wait-1", "pay-1"]


def go_file(h: DaemonHandle) -> Path:
    """The file whose existence ends sleep-1's nap (nap.py)."""
    return h.home / "nap.go"


def old_venv(commit: str, root: Path) -> Path:
    """A venv running ys as it was at `commit`; its python."""
    check = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
    )
    assert check.returncode == 0, (
        f"commit {commit} is not in this clone: the upgrade test needs the full git history "
        "(clone without --depth)"
    )
    src = root / f"src-{commit}"
    src.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "ys"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(src, filter="data")
    venv = root / f"venv-{commit}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # the old source first, then this venv's dependencies (not its editable ys: the finder
    # that maps `ys` here lives in a .pth of its own, which is not read from this folder)
    deps = sysconfig.get_paths()["purelib"]
    Path(site, "ys_old.pth").write_text(f"{src}\n")
    Path(site, "ys_deps.pth").write_text(f"{deps}\n")
    out = subprocess.run(
        [str(py), "-c", "import ys, sys; print(ys.__file__)"],
        cwd=root,  # not this checkout: `-c` and `-m` put the working folder first
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out.startswith(str(src)), out
    return py


def run(h: DaemonHandle, py: Path | None, *args: str, ok: tuple[int, ...] = (0,)) -> Any:
    cmd = [str(py) if py else sys.executable, "-m", "ys", *args]
    r = subprocess.run(cmd, env=h.env, cwd=h.home, capture_output=True, text=True, timeout=60)
    assert r.returncode in ok, (args, r.returncode, r.stderr)
    return json.loads(r.stdout) if "--json" in args and r.stdout.strip() else r


def status(h: DaemonHandle, py: Path | None, eid: str) -> str:
    return str(run(h, py, "get", eid, "--json")["status"])


def start(h: DaemonHandle, py: Path | None) -> DaemonHandle:
    log = open(h.home / "daemon-test.log", "ab")  # noqa: SIM115
    h.proc = subprocess.Popen(
        [str(py) if py else sys.executable, "-m", "ys.daemon", "run", "--concurrency", "4"],
        env=h.env,
        cwd=h.home,
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    h.pids.append(h.proc.pid)
    proc = h.proc

    def up() -> bool:
        assert proc.poll() is None, h.log()[-2000:]
        return h.socket.exists() and answers(h, py)

    wait_until(up, timeout=90)  # old code compiles its imports on a first start: slow under load
    return h


def answers(h: DaemonHandle, py: Path | None) -> bool:
    r = subprocess.run(
        [str(py) if py else sys.executable, "-m", "ys", "list", "--json"],
        env=h.env,
        cwd=h.home,
        capture_output=True,
    )
    return r.returncode == 0


def snapshot(h: DaemonHandle, py: Path | None, values: bool = True) -> dict[str, Any]:
    """What the CLI says of every record: executions, their histories, values, schedules,
    effects (`values`: whether that ys had durable values on its database)."""
    snap: dict[str, Any] = {"get": {}, "history": {}}
    for eid in IDS if values else [e for e in IDS if e != "wait-1"]:
        snap["get"][eid] = run(h, py, "get", eid, "--json")
        snap["history"][eid] = run(h, py, "history", eid, "--json")
    if values:
        snap["store"] = run(h, py, "store", "ls", "--json")
    snap["schedules"] = run(h, py, "schedule", "list", "--json")
    snap["effects"] = run(h, py, "effects", "--json")
    return snap


def same(old: Any, new: Any, where: str) -> None:
    """Every field the old ys showed reads back the same (new fields may be added)."""
    if isinstance(old, dict):
        assert isinstance(new, dict), where
        for k, v in old.items():
            if k in ("next_page_token", "uptime_seconds"):
                continue
            assert k in new, f"{where}.{k} is gone"
            same(v, new[k], f"{where}.{k}")
    elif isinstance(old, list):
        assert isinstance(new, list) and len(new) == len(old), f"{where}: {old} != {new}"
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            same(a, b, f"{where}[{i}]")
    elif isinstance(old, (int, float)) and isinstance(new, str) and not isinstance(old, bool):
        # a time the old API gave in seconds is ISO 8601 now: the same instant, to the ms
        assert abs(parse_iso(new) - old) < 0.001, f"{where}: {old!r} became {new!r}"
    else:
        assert old == new, f"{where}: {old!r} became {new!r}"


def write_with(
    commit: str, root: Path, values: bool = True, **env: str
) -> tuple[DaemonHandle, dict[str, Any]]:
    """A home whose database ys at `commit` wrote (`env`: the home's, YS_DATABASE for
    PostgreSQL); what that ys showed of it. Without `values` (a ys whose adapter had no
    durable values), no value is put and no execution waits on one."""
    py = old_venv(commit, root)
    h = make_home(root, **env)
    h.env.pop("PYTHONPATH", None)
    for name, text in WORKFLOWS.items():
        h.write(name, text.replace("{go!r}", repr(str(go_file(h)))))
    start(h, py)
    try:
        run(h, py, "trigger", "hello", "--id", "done-1")
        run(h, py, "trigger", "boom", "--id", "failed-1")
        run(h, py, "trigger", "nap", "--id", "sleep-1", "-p", f"until={NAP_UNTIL}")
        run(h, py, "trigger", "nap", "--id", "cancel-1", "-p", "until=4102444800")
        if values:
            run(h, py, "trigger", "waiter", "--id", "wait-1", "-p", "key=approve/order-1")
        run(h, py, "trigger", "pay", "--id", "pay-1", "-p", "eid=charge-1")
        if values:
            run(h, py, "store", "put", "config/limit", '{"max": 3}')
        run(h, py, "schedule", "add", "nightly", "hello", "--cron", "0 3 * * *", "--tz", "UTC")
        wait_until(lambda: status(h, py, "cancel-1") == "suspended", timeout=120)
        run(h, py, "cancel", "cancel-1")
        run(h, py, "wake", "cancel-1")
        want = {
            "done-1": {"completed"},
            "failed-1": {"failed"},
            "sleep-1": {"suspended"},
            "cancel-1": {"cancelled"},
            "wait-1": {"suspended", "waiting"},
            "pay-1": {"completed"},
        }
        if not values:
            del want["wait-1"]
        wait_until(lambda: all(status(h, py, e) in s for e, s in want.items()), timeout=180)
        snap = snapshot(h, py, values)
    finally:
        h.stop()
    return h, snap


def opens_with_nothing_lost(
    h: DaemonHandle,
    old: dict[str, Any],
    commit: str,
    migrations: Callable[[], Any],
    values: bool = True,
) -> None:
    """Today's daemon on the home `write_with` left: every record reads back as the old ys
    showed it, the sleeping and waiting executions finish, and a second start migrates
    nothing (`migrations`: the database's schema_migrations rows). Stops the daemon."""
    try:
        h.start()
        new = snapshot(h, None, values)
        same(old, new, commit)

        c = h.client()
        c.store_put("approve/order-1", "yes")
        # `ys wake` delivers the sleeper again, and the replay keeps the wake the old ys saved
        deliveries = claimed(c, "sleep-1")
        c.wake("sleep-1")
        wait_until(
            lambda: (
                claimed(c, "sleep-1") == deliveries + 1 and kinds(c, "sleep-1")[-1] == "suspended"
            ),
            timeout=120,
        )
        assert run(h, None, "get", "sleep-1", "--json")["due_at"] == new["get"]["sleep-1"]["due_at"]
        go_file(h).touch()  # then it sleeps no more
        c.wake("sleep-1")
        wait_until(lambda: status(h, None, "sleep-1") == "completed", timeout=120)
        assert c.get("sleep-1")["outcome"]["result"] == {"before": "b", "after": "a"}
        if values:
            wait_until(lambda: status(h, None, "wait-1") == "completed", timeout=120)
            assert c.get("wait-1")["outcome"]["result"] == {"got": "yes"}
        assert c.get("pay-1")["outcome"]["result"] == {"paid": "charge-1"}
        h.stop()

        migrated = migrations()
        h.start()  # a second start migrates nothing
        assert migrations() == migrated
        again = snapshot(h, None, values)
        same(new["schedules"], again["schedules"], "schedules after a second start")
        for eid in ("done-1", "failed-1", "cancel-1", "pay-1"):
            same(new["get"][eid], again["get"][eid], eid)
    finally:
        h.stop()
