"""A laptop's SQLite history taken to PostgreSQL: `ys export` there, `ys import` here, `ys
export` again gives the same lines (ordering aside), with executions of every status, steps,
children, effects, values, waits and schedules; `ys migrate --to postgresql://...` does it in
one go, refusing a database that holds executions unless --merge. Daemons started on
PostgreSQL then go on with what moved and run nothing twice (a running execution moved as
due re-runs none of its recorded steps)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support import DaemonHandle, alive, make_home, parse_iso, wait_until
from tests.upgrade_support import NAP_UNTIL
from tests.upgrade_support import WORKFLOWS as UPGRADE_WORKFLOWS

WORKFLOWS = {
    **{k: UPGRADE_WORKFLOWS[k] for k in ("hello.py", "boom.py", "waiter.py", "pay.py")},
    # sleeps until a far-off time (NAP_UNTIL), past the test whatever the load: the test ends
    # it through the file `go` and `ys wake`, as tests/upgrade_support.py ends its sleep-1
    "nap.py": """
import os, time
import ys

@ys.workflow
def main(step, params):
    before = step.run("before", lambda: "b")
    if not os.path.exists(params["go"]):
        step.sleep("nap", max(0.0, params["until"] - time.time()))
    return {"before": before, "after": step.run("after", lambda: "a")}
""",
    "parent.py": """
import ys

@ys.workflow
def main(step, params):
    return {"child": step.call("child", "hello", {})}
""",
    # one at a time: the first holds its delivery (running) until a file exists, the second
    # waits for the slot (admitted); each step that runs writes a line the test counts
    "gate.py": """
import os, time
import ys

def note(d, what):
    with open(os.path.join(d, "ran"), "a") as f:
        f.write(what + "\\n")
    return what

def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.01)
    return True

@ys.workflow(concurrency=1)
def main(step, params):
    step.run("first", note, params["d"], "first " + params["label"])
    step.run("gate", wait_for, os.path.join(params["d"], "go"))
    return step.run("last", note, params["d"], "last " + params["label"])
""",
}
STATUSES = {
    "done-1": {"completed"},
    "failed-1": {"failed"},
    "sleep-1": {"suspended"},
    "cancel-1": {"cancelled"},
    "wait-1": {"suspended"},
    "pay-1": {"completed"},
    "parent-1": {"completed"},
    "gate-1": {"running"},
    "gate-2": {"admitted"},
}


def _get(h: DaemonHandle, eid: str) -> dict[str, Any]:
    r = h.ys("get", eid, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def _nap_go(d: Path) -> Path:
    """The file whose existence ends sleep-1's nap (nap.py), in the folder both homes share."""
    return d / "nap.go"


def _laptop(root: Path) -> tuple[DaemonHandle, Path]:
    """A SQLite home, its daemon killed (as a laptop's may be) while it held gate-1's
    delivery, with every kind of record; and the folder the gate workflow writes in."""
    root.mkdir()
    d = root / "gate"
    d.mkdir()
    h = make_home(root)
    for name, text in WORKFLOWS.items():
        h.write(name, text)
    h.start()
    c = h.client()
    c.trigger("hello", {}, execution_id="done-1")
    c.trigger("boom", {}, execution_id="failed-1")
    nap = {"until": NAP_UNTIL, "go": str(_nap_go(d))}
    c.trigger("nap", nap, execution_id="sleep-1")
    c.trigger("nap", nap, execution_id="cancel-1")
    c.trigger("waiter", {"key": "approve/order-1"}, execution_id="wait-1")
    c.trigger("pay", {"eid": "charge-1"}, execution_id="pay-1")
    c.trigger("parent", {}, execution_id="parent-1")
    c.trigger("gate", {"d": str(d), "label": "gate-1"}, execution_id="gate-1")
    wait_until(lambda: (d / "ran").exists(), timeout=30)
    c.trigger("gate", {"d": str(d), "label": "gate-2"}, execution_id="gate-2")
    c.store_put("config/limit", '{"max": 3}')
    assert h.ys("schedule", "add", "nightly", "hello", "--cron", "0 3 * * *").returncode == 0
    wait_until(lambda: _get(h, "cancel-1")["status"] == "suspended", timeout=30)
    assert h.ys("cancel", "cancel-1").returncode == 0
    wait_until(
        lambda: all(_get(h, e)["status"] in s for e, s in STATUSES.items()),
        timeout=60,
        message="every status",
    )
    h.kill9()
    h.kill_workers()
    return h, d


def test_sqlite_export_imported_into_postgresql_exports_the_same_lines(tmp_path, pg_url):
    with _laptop(tmp_path / "laptop")[0] as laptop:
        d = tmp_path / "laptop" / "gate"
        r = laptop.ys("export")
        assert r.returncode == 0, r.stderr
        first = r.stdout
    lines = [json.loads(x) for x in first.splitlines()]
    by_id = {x["execution"]["execution_id"]: x for x in lines if x["kind"] == "execution"}
    child = next(x for x in by_id.values() if x["execution"]["parent_id"] == "parent-1")
    assert {e: x["execution"]["status"] for e, x in by_id.items()} == {
        **{e: next(iter(s)) for e, s in STATUSES.items()},
        "gate-1": "admitted",  # running when the daemon died: moved as due
        child["execution"]["execution_id"]: "completed",
    }
    gate = by_id["gate-1"]
    assert gate["events"][-1]["kind"] == "released" and '"moved"' in gate["events"][-1]["data"]
    assert gate["execution"]["due_at"] is not None
    assert [s["key"] for s in gate["steps"]] == ["first"]
    assert [s["step_key"] for s in by_id["parent-1"]["starts"]] == ["child"]
    assert by_id["pay-1"]["effect_begins"][0]["effect_id"] == "charge-1"
    assert by_id["wait-1"]["value_waits"][0]["key"] == "approve/order-1"
    assert any(x["kind"] == "effect" and x["effect_id"] == "charge-1" for x in lines)
    assert any(x["kind"] == "value" and x["key"] == "config/limit" for x in lines)
    assert any(x["kind"] == "schedule" and x["name"] == "nightly" for x in lines)
    assert sum(x["kind"] == "script" for x in lines) == len(WORKFLOWS)

    (tmp_path / "pg").mkdir()
    with make_home(tmp_path / "pg", YS_DATABASE=pg_url) as pg:
        for name, text in WORKFLOWS.items():
            pg.write(name, text)
        src = tmp_path / "laptop.jsonl"
        src.write_text(first)
        r = pg.ys("import", str(src), "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["counts"]["execution"]["imported"] == len(by_id)
        r = pg.ys("export")
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.splitlines()) == sorted(first.splitlines())
        r = pg.ys("import", str(src), "--json")  # again: all there
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["counts"]["execution"]["skipped"] == len(by_id)

        _runs_on(pg, d)


def _runs_on(h: DaemonHandle, d: Path) -> None:
    """Daemons on the new database go on with what moved, and run nothing twice."""
    h.start()
    c = h.client()
    (d / "go").touch()
    c.store_put("approve/order-1", "yes")
    # the sleeper moved with its wake, far off: not delivered before it; ended by hand
    sleeper = _get(h, "sleep-1")
    assert sleeper["status"] == "suspended", sleeper
    assert abs(parse_iso(sleeper["due_at"]) - NAP_UNTIL) < 60, sleeper
    _nap_go(d).touch()
    c.wake("sleep-1")
    for eid in ("gate-1", "gate-2", "sleep-1", "wait-1"):
        wait_until(lambda eid=eid: _get(h, eid)["status"] == "completed", timeout=60, message=eid)
    assert sorted((d / "ran").read_text().splitlines()) == [
        "first gate-1",
        "first gate-2",
        "last gate-1",
        "last gate-2",
    ]
    assert _get(h, "wait-1")["outcome"]["result"] == {"got": "yes"}
    assert _get(h, "sleep-1")["outcome"]["result"] == {"before": "b", "after": "a"}
    r = h.ys("schedule", "list", "--json")
    assert r.returncode == 0 and "nightly" in r.stdout, r.stderr


def test_migrate_moves_a_laptop_to_postgresql_and_refuses_a_second_time(tmp_path, pg_url):
    laptop, d = _laptop(tmp_path / "laptop")
    with laptop:
        r = laptop.ys("migrate", "--to", pg_url, "--json")
        assert r.returncode == 0, r.stderr
        counts = json.loads(r.stdout)["counts"]
        assert counts["execution"]["imported"] >= len(STATUSES)
        assert counts["value"]["imported"] == counts["schedule"]["imported"] == 1
        assert counts["effect"]["imported"] == 1 and counts["script"]["imported"] == len(WORKFLOWS)

        r = laptop.ys("migrate", "--to", pg_url)
        assert r.returncode == 3 and "--merge" in r.stderr, r.stderr
        r = laptop.ys("migrate", "--to", pg_url, "--merge", "--json")
        assert r.returncode == 0, r.stderr
        again = json.loads(r.stdout)["counts"]
        assert sum(c["imported"] for c in again.values()) == 0
        assert again["execution"]["skipped"] == counts["execution"]["imported"]
        r = laptop.ys("daemon", "run", timeout=30)  # the laptop's file says where its data went
        assert r.returncode == 3, r.stderr
        assert "was moved to postgresql://" in r.stderr.strip().splitlines()[-1], r.stderr

    (tmp_path / "pg").mkdir()
    with make_home(tmp_path / "pg", YS_DATABASE=pg_url) as pg:
        for name, text in WORKFLOWS.items():
            pg.write(name, text)
        _runs_on(pg, d)


def test_a_postgresql_database_moved_away_starts_no_daemon_and_doctor_says_where(tmp_path, pg_url):
    (tmp_path / "pg").mkdir()
    target = tmp_path / "laptop.db"
    with make_home(tmp_path / "pg", YS_DATABASE=pg_url) as pg:
        r = pg.ys("migrate", "--to", str(target))
        assert r.returncode == 0, r.stderr
        r = pg.ys("daemon", "run", timeout=30)
        assert r.returncode == 3, r.stderr
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("FAILED_PRECONDITION: the data of "), last
        assert f"was moved to {target} by `ys migrate`" in last, last
        doctor = pg.ys("doctor", "--json")
        checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
        assert doctor.returncode == 1
        assert not checks["database"]["ok"], checks["database"]
        assert f"moved to {target}" in checks["database"]["detail"], checks["database"]


def test_a_daemon_running_on_a_database_migrated_away_stops_delivering_and_says_where(
    tmp_path, pg_url
):
    """`ys migrate` run while a daemon works on the PostgreSQL database (from another box, say):
    the daemon notices the mark within seconds, kills its worker (the execution runs on the
    target now), says once where the data went, and exits 3; the worker's step never ends
    here, and nothing more is claimed."""
    (tmp_path / "pg").mkdir()
    d = tmp_path / "gate"
    d.mkdir()
    (tmp_path / "laptop").mkdir()
    laptop = make_home(tmp_path / "laptop")
    target = laptop.db
    with make_home(tmp_path / "pg", YS_DATABASE=pg_url) as pg:
        pg.write("gate.py", WORKFLOWS["gate.py"])
        pg.start()
        with pg.client() as c:
            c.trigger("gate", {"d": str(d), "label": "a"}, execution_id="gate-1")
            wait_until(lambda: pg.worker_pids(), timeout=30, message="the gate's worker")
            worker = pg.worker_pids()[0]
            r = pg.ys("migrate", "--to", str(target), timeout=60)
            assert r.returncode == 0, r.stderr
            assert pg.proc is not None
            wait_until(lambda: pg.proc.poll() is not None, timeout=30, message="the daemon to stop")
        assert pg.proc.returncode == 3, pg.log()[-3000:]
        wait_until(lambda: not alive(worker), timeout=10, message="its worker to be killed")
        said = [ln for ln in pg.log().splitlines() if f"was moved to {target}" in ln]
        assert len(said) == 1 and "stopping: the data of" in said[0], pg.log()[-3000:]
        assert "Traceback" not in pg.log(), pg.log()[-3000:]
        (d / "go").touch()  # the step it ran cannot end here now
    with laptop:
        laptop.write("gate.py", WORKFLOWS["gate.py"])
        laptop.start()
        with laptop.client() as c:
            assert c.wait("gate-1", timeout=60)["status"] == "completed"
    ran = (d / "ran").read_text().splitlines()
    assert ran.count("last a") == 1, ran
