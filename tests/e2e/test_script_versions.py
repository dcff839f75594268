"""Script versions through a real daemon (docs/design.md, "Workflow options"): an execution admitted under version
A waits; its script is edited to B; unpinned it resumes under B and `describe` says the
script changed, pinned it resumes under A (a step writes which version ran); `ys workflows`
shows the short hash and the live executions admitted under an older one; `ys gc` keeps the
versions live executions need and prunes the rest."""

from __future__ import annotations

import hashlib
import json
import textwrap

import pytest

from tests.support import events, kinds, make_home, wait_until

SCRIPT = """
    import ys

    VERSION = "{version}"

    @ys.workflow({options})
    def main(step, params):
        first = step.run("first", lambda: VERSION)
        step.wait_for("go", params["key"])
        second = step.run("second", lambda: VERSION)
        return {{"first": first, "second": second}}
"""


def source(version: str, pin: bool) -> str:
    return SCRIPT.format(version=version, options="pin=True" if pin else "")


def sha(h, name: str) -> str:
    return hashlib.sha256((h.workflows / name).read_bytes()).hexdigest()


def workflow(c, name: str) -> dict:
    return {w["name"]: w for w in c.workflows()["workflows"]}[name]


@pytest.mark.parametrize("pin", [False, True], ids=["unpinned", "pinned"])
def test_an_edit_applies_to_new_executions_only_when_pinned(tmp_path, pin):
    with make_home(tmp_path) as h:
        h.write("job.py", source("A", pin))
        a = sha(h, "job.py")
        h.start()
        with h.client() as c:
            c.trigger("job", {"key": "go/1"}, execution_id="one")
            wait_until(lambda: c.get("one")["status"] == "suspended", message="one waits")
            assert c.get("one")["script_sha256"] == a
            h.write("job.py", source("B", pin))
            b = sha(h, "job.py")
            wait_until(lambda: workflow(c, "job")["sha256"] == b, message="the edit seen")
            listed = workflow(c, "job")  # the store has B as current once the listing does
            assert listed["older_live"] == 1 and listed["pin"] is pin
            c.store_put("go/1", True)
            done = c.wait("one", timeout=60)
            assert done["outcome"]["result"] == {"first": "A", "second": "A" if pin else "B"}
            described = c.describe("one")
            assert described["script_sha256"] == a and described["script_sha256_now"] == b
            assert described["script_changed"] is True
            # the first delivery ran A; the edit may wake it once more before the put does
            ran = [d["script_sha256"] for d in described["deliveries"]]
            assert ran[0] == a and len(ran) >= 2
            assert set(ran[1:]) == ({a} if pin else {b})
            # a new execution is admitted, and runs, under B
            c.trigger("job", {"key": "go/2"}, execution_id="two")
            c.store_put("go/2", True)
            assert c.wait("two", timeout=60)["outcome"]["result"] == {"first": "B", "second": "B"}
            assert c.describe("two")["script_changed"] is False


def test_gc_keeps_the_versions_live_executions_need_and_prunes_the_rest(tmp_path):
    with make_home(tmp_path) as h:
        h.write("job.py", source("A", True))
        a = sha(h, "job.py")
        h.start()
        scripts = h.home / "scripts"
        with h.client() as c:
            c.trigger("job", {"key": "go/1"}, execution_id="waits-on-a")
            wait_until(lambda: c.get("waits-on-a")["status"] == "suspended")
            h.write("job.py", source("B", True))
            b = sha(h, "job.py")
            wait_until(lambda: workflow(c, "job")["sha256"] == b)
            h.write("job.py", source("C", True))
            cc = sha(h, "job.py")
            wait_until(lambda: workflow(c, "job")["sha256"] == cc)
        copies = {p.name for p in scripts.iterdir()}
        assert {f"{a}.py", f"{b}.py", f"{cc}.py"} <= copies
        assert oct(scripts.stat().st_mode & 0o777) == "0o700"
        out = h.ys("gc", "--json")
        assert out.returncode == 0, out.stderr
        # A: a live execution needs it; C: the current one; B: nobody
        assert {p.name for p in scripts.iterdir()} == {f"{a}.py", f"{cc}.py"}
        with h.client() as c:
            c.store_put("go/1", True)
            assert c.wait("waits-on-a", timeout=60)["outcome"]["result"]["second"] == "A"
        h.ys("gc", "--older-than", "0", "--json")
        assert {p.name for p in scripts.iterdir()} == {f"{cc}.py"}
        assert json.loads(h.ys("workflows", "--json").stdout)["workflows"][0]["older_live"] == 0


SLEEPER = """
    import ys

    VERSION = "{version}"

    @ys.workflow
    def main(step, params):
        step.run("first", lambda: VERSION)
        step.sleep("nap", 3600)
        return VERSION
"""
PROBE = "import ys\n\n@ys.workflow\ndef main(step, params):\n    return 1\n"


def test_an_edit_wakes_no_sleeping_execution(tmp_path):
    with make_home(tmp_path) as h:
        h.write("napper.py", SLEEPER.format(version="A"))
        h.start()
        with h.client() as c:
            c.trigger("napper", execution_id="nap")
            wait_until(lambda: c.get("nap")["status"] == "suspended", message="nap sleeps")
            h.write("napper.py", SLEEPER.format(version="B"))
            b = sha(h, "napper.py")
            wait_until(lambda: workflow(c, "napper")["sha256"] == b, message="the edit seen")
            # the registry handles one change at a time: once a later script is known, what
            # the edit did (a wake, if any) is committed
            h.write("probe.py", PROBE)
            assert c.wait(c.trigger("probe")["execution_id"], timeout=60)["status"] == "completed"
            assert "wake_requested" not in kinds(c, "nap")
            assert c.get("nap")["attempts"] == 1 and c.get("nap")["status"] == "suspended"


def test_a_pinned_execution_runs_its_version_after_its_script_is_deleted(tmp_path):
    with make_home(tmp_path) as h:
        path = h.write("job.py", source("A", True))
        a = sha(h, "job.py")
        h.start()
        with h.client() as c:
            c.trigger("job", {"key": "go/1"}, execution_id="one")
            wait_until(lambda: c.get("one")["status"] == "suspended", message="one waits")
            path.unlink()
            wait_until(lambda: "job" not in {w["name"] for w in c.workflows()["workflows"]})
            c.store_put("go/1", True)
            done = c.wait("one", timeout=60)
            assert done["outcome"] == {
                "status": "completed",
                "result": {"first": "A", "second": "A"},
            }
            assert [d["script_sha256"] for d in c.describe("one")["deliveries"]] == [a, a]


QUICK = """
    import ys

    @ys.workflow({options})
    def main(step, params):
        return step.run("which", lambda: "{version}")
"""


def quick(version: str, pin: bool) -> str:
    return QUICK.format(version=version, options="pin=True" if pin else "")


def recorded(c, execution_id: str) -> set[str | None]:
    """Every hash the execution's record, history and deliveries carry."""
    d = c.describe(execution_id)
    hashes = {d["script_sha256"]} | {x["script_sha256"] for x in d["deliveries"]}
    hashes |= {
        e["data"].get("script_sha256")
        for e in events(c, execution_id)
        if e["kind"] in ("admitted", "claimed")
    }
    return hashes


@pytest.mark.parametrize("pin", [False, True], ids=["unpinned", "pinned"])
def test_a_trigger_right_after_an_edit_records_the_version_it_runs(tmp_path, pin):
    with make_home(tmp_path) as h:
        h.write("quick.py", quick("A", pin))
        h.start()
        with h.client() as c:
            assert c.wait(c.trigger("quick")["execution_id"], timeout=60)["status"] == "completed"
            h.write("quick.py", quick("B", pin))
            b = sha(h, "quick.py")
            c.trigger("quick", execution_id="v2")  # at once: before the watcher says a word
            assert c.wait("v2", timeout=60)["outcome"]["result"] == "B"
            assert recorded(c, "v2") == {b}


def test_a_retry_right_after_a_fix_records_the_fixed_version(tmp_path):
    with make_home(tmp_path) as h:
        h.write(
            "fixme.py",
            quick("A", False).replace("return step.run", 'raise ValueError("bug"); step.run'),
        )
        h.start()
        with h.client() as c:
            c.trigger("fixme", execution_id="x")
            assert c.wait("x", timeout=60)["status"] == "failed"
            h.write("fixme.py", quick("fixed", False))
            fixed = sha(h, "fixme.py")
            again = c.retry("x")["execution_id"]  # at once, as a person does
            assert c.wait(again, timeout=60)["outcome"]["result"] == "fixed"
            assert recorded(c, again) == {fixed}


def test_a_worker_runs_the_bytes_of_the_version_its_delivery_records(tmp_path, monkeypatch):
    """Edited between the claim and the load: the worker runs the kept copy of the claimed
    version, not the file's new bytes (it hashes what it reads)."""
    from ys.worker.delivery import load_script

    monkeypatch.setenv("YS_HOME", str(tmp_path / "home"))
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(quick("A", False)))
    a = hashlib.sha256(script.read_bytes()).hexdigest()
    copy = tmp_path / f"{a}.py"
    copy.write_bytes(script.read_bytes())
    script.write_text(textwrap.dedent(quick("B", False)))

    class Runs:
        def run(self, key, fn):
            return fn()

    assert load_script(str(script), a, str(copy))(Runs(), {}) == "A"
    assert load_script(str(script))(Runs(), {}) == "B"  # no version asked: the file as it is
