"""Whatever is wrong with one script is that script's load error, listed by `ys workflows`
and `ys doctor`: nothing in one script stops the registry or the daemon. Triggering a script
that cannot run admits the execution and says on stderr that it waits, and why."""

from __future__ import annotations

import json
import os

import pytest
from e2e_support import fixture_dir, kinds, wait_until, write_workflow

pytestmark = pytest.mark.e2e

BAD_HEADER = '#!/bin/sh\n# ys: schedule="0 3 * * *\necho never\n'  # the quote is not closed
HELLO = """
@ys.workflow
def main(step, params):
    return step.run("hi", lambda: "hello")
"""


def _listed(client, name: str) -> dict | None:
    return {w["name"]: w for w in client.workflows()["workflows"]}.get(name)


def _error(client, name: str) -> str:
    return (_listed(client, name) or {}).get("error") or ""


def test_a_bad_shell_header_at_start_is_that_scripts_error_and_the_daemon_serves(ys_home):
    write_workflow(ys_home, "hello", HELLO)
    ys_home.write("nightly", BAD_HEADER, mode=0o700)
    daemon = ys_home.start()  # before the fix: it held the lock and never answered
    c = daemon.client()
    assert "No closing quotation" in _error(c, "nightly")
    assert _listed(c, "hello")["error"] is None
    assert c.wait(c.trigger("hello")["execution_id"], timeout=30)["outcome"]["result"] == "hello"
    people = daemon.ys("workflows")
    assert people.returncode == 0 and "nightly" in people.stdout
    assert "No closing quotation" in people.stdout


def test_a_bad_shell_header_while_running_leaves_the_watcher_alive(daemon):
    c = daemon.client()
    daemon.write("nightly", BAD_HEADER, mode=0o700)
    wait_until(lambda: "No closing quotation" in _error(c, "nightly"), message="its error")
    write_workflow(daemon, "latecomer", HELLO)  # the watcher still picks up what comes next
    wait_until(lambda: _listed(c, "latecomer"), message="the next script")
    daemon.write("nightly", BAD_HEADER.replace("* * *\n", '* * *"\n'), mode=0o700)
    wait_until(lambda: _listed(c, "nightly")["error"] is None, message="the fix")
    assert _listed(c, "nightly")["schedule"] == {"schedule": "0 3 * * *"}


BAD_SCHEDULES = {
    "short.py": """
        import ys

        @ys.workflow(schedule="0 3 * *")
        def main(step, params):
            return 1
    """,
    "martian.py": """
        import ys

        @ys.workflow(schedule="0 3 * * *", tz="Mars/Olympus_Mons")
        def main(step, params):
            return 1
    """,
    "zoned": '#!/bin/sh\n# ys: schedule="0 3 * * *" tz=Mars/Olympus_Mons\necho hi\n',
}


def test_a_bad_declared_schedule_is_the_scripts_error_in_workflows_and_doctor(daemon):
    for name, source in BAD_SCHEDULES.items():
        daemon.write(name, source, mode=0o600 if name.endswith(".py") else 0o700)
    c = daemon.client()
    names = ("short", "martian", "zoned")
    wait_until(lambda: all(_error(c, n) for n in names), message="every error listed")
    assert "0 3 * *" in _error(c, "short") and "bad schedule" in _error(c, "short")
    assert "Mars/Olympus_Mons" in _error(c, "martian")
    assert "Mars/Olympus_Mons" in _error(c, "zoned")
    assert daemon.ys("schedule", "list", "--json").stdout.count('"source":"script"') == 0

    doctor = daemon.ys("doctor", "--json")
    assert doctor.returncode == 1
    checks = {ch["name"]: ch for ch in json.loads(doctor.stdout)["checks"]}
    assert [n for n, ch in checks.items() if not ch["ok"]] == ["workflows folder"]
    detail = checks["workflows folder"]["detail"]
    assert all(f"{n}: bad schedule" in detail for n in names), detail


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "typer"])
def test_triggering_a_script_that_cannot_run_admits_it_and_warns_why(daemon, tmp_path, fast):
    outside = fixture_dir(tmp_path) / "outside.py"
    outside.write_text(HELLO)
    os.symlink(outside, daemon.workflows / "escape.py")
    daemon.write("fragile.py", "import ys\n\n@ys.workflow\ndef main(step, params)\n    pass\n")
    daemon.write("open.py", "import ys\n" + HELLO, mode=0o666)
    write_workflow(daemon, "hello", HELLO)
    c = daemon.client()
    expect = {
        "fragile": "SyntaxError",
        "open": "writable by others",
        "escape": "symlink that leads out of the workflows folder",
    }
    wait_until(
        lambda: all(_error(c, n) for n in expect) and _listed(c, "hello"),
        message="every script listed",
    )
    env = {} if fast else {"YS_NO_FAST_PATH": "1"}
    for name, why in expect.items():
        result = daemon.ys("trigger", name, "--id", f"{name}-1", env=env)
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"{name}-1\n"  # only the ID
        warning = result.stderr.strip().splitlines()
        assert len(warning) == 1 and warning[0].startswith("warning: "), result.stderr
        assert "cannot run until its script is fixed" in warning[0] and why in warning[0]
        # admitted, and it waits: a delivery may be claiming it this instant, and gives it up
        wait_until(
            lambda n=name: c.get(f"{n}-1")["status"] == "admitted",
            message=f"{name}-1 waiting for its script",
        )
        as_json = daemon.ys("trigger", name, "--json", env=env)
        assert as_json.returncode == 0
        assert why in json.loads(as_json.stdout)["warning"]
    healthy = daemon.ys("trigger", "hello", env=env)
    assert (healthy.returncode, healthy.stderr) == (0, "")  # a script that runs: no warning


def test_workflows_shows_a_declared_schedule_as_its_expression_and_zone(daemon):
    daemon.write(
        "local.py",
        "import ys\n\n@ys.workflow(schedule='5 3 * * *')\ndef main(s, p):\n    return 1\n",
    )
    daemon.write(
        "paris", '#!/bin/sh\n# ys: schedule="0 4 * * 1" tz=Europe/Paris\necho hi\n', mode=0o700
    )
    c = daemon.client()
    wait_until(lambda: _listed(c, "local") and _listed(c, "paris"), message="both listed")
    out = daemon.ys("workflows")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line.strip()}
    assert "5 3 * * *" in rows["local"] and "{" not in rows["local"], out.stdout
    assert "0 4 * * 1 Europe/Paris" in rows["paris"] and "{" not in rows["paris"], out.stdout


def test_a_shell_script_without_its_execute_bit_is_listed_and_admitted_with_why(daemon):
    path = daemon.write("backup.sh", "#!/bin/sh\necho saved\n", mode=0o600)
    daemon.write("README.md", "# my workflows\n\nnotes\n", mode=0o600)
    daemon.write("notes", "just text, no shebang\n", mode=0o600)
    c = daemon.client()
    why = f"not executable: chmod +x {path}"
    wait_until(lambda: _error(c, "backup") == why, message="its error")
    assert _listed(c, "README") is None and _listed(c, "notes") is None
    result = daemon.ys("trigger", "backup", "--id", "b-1")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "b-1\n" and why in result.stderr
    # claimed, found broken and put back to wait (never run): admitted again, its wake an hour off
    wait_until(
        lambda: "released" in kinds(c, "b-1") and c.get("b-1")["status"] == "admitted",
        message="put back to wait for its script",
    )
    assert "completed" not in kinds(c, "b-1")
    os.chmod(path, 0o700)  # fixed: the waiting execution runs
    assert c.wait("b-1", timeout=30)["outcome"]["result"]["last_line"] == "saved"
    assert _error(c, "backup") == ""


def test_an_on_failure_naming_no_workflow_is_a_warning_in_workflows_doctor_and_log(ys_home):
    (ys_home.home / "config.toml").write_text('on_failure = "nobody"\n')
    ys_home.write(
        "boom.py",
        'import ys\n\n@ys.workflow(on_failure="ghost")\ndef main(s, p):\n    raise ValueError("x")\n',
    )
    ys_home.write("sh", "#!/bin/sh\n# ys: on_failure=phantom\nexit 3\n", mode=0o700)
    ys_home.write("plain.py", "import ys\n\n@ys.workflow\ndef main(s, p):\n    return 1\n")
    daemon = ys_home.start()
    c = daemon.client()
    listed = {w["name"]: w for w in c.workflows()["workflows"]}
    assert "ghost" in listed["boom"]["warning"] and listed["boom"]["error"] is None
    assert "phantom" in listed["sh"]["warning"]
    assert "nobody" in listed["plain"]["warning"]  # config.toml's handler
    people = daemon.ys("workflows")
    assert "ghost" in people.stdout and "phantom" in people.stdout, people.stdout
    doctor = daemon.ys("doctor", "--json")
    assert doctor.returncode == 1, doctor.stdout
    checks = {ch["name"]: ch for ch in json.loads(doctor.stdout)["checks"]}
    detail = checks["workflows folder"]["detail"]
    assert not checks["workflows folder"]["ok"]
    assert all(n in detail for n in ("ghost", "phantom", "nobody")), detail
    for i in range(2):
        c.wait(c.trigger("boom", execution_id=f"boom-{i}")["execution_id"], timeout=30)
    log = daemon.log()
    assert log.count("on_failure names ghost") == 1, log[-3000:]
    assert log.count("on_failure names nobody") == 1, log[-3000:]


def test_executions_waiting_for_a_broken_or_missing_script_say_so(daemon):
    daemon.write("fragile.py", "import ys\n\n@ys.workflow\ndef main(step, params)\n    pass\n")
    gone = daemon.write("gone.py", "import ys\n\n@ys.workflow\ndef main(step, params)\n    pass\n")
    c = daemon.client()
    wait_until(lambda: _error(c, "fragile") and _error(c, "gone"), message="both broken")
    c.trigger("fragile", execution_id="f-1")
    c.trigger("gone", execution_id="g-1")
    gone.unlink()
    wait_until(lambda: _listed(c, "gone") is None, message="gone.py removed")

    def released(x: str) -> bool:
        return c.history(x)["events"][-1]["kind"] == "released"

    wait_until(lambda: released("f-1") and released("g-1"), message="both wait")
    ps = {r["execution_id"]: r for r in c.ps()["executions"]}
    assert ps["f-1"]["waiting_for"].startswith("script broken (SyntaxError")
    assert ps["g-1"]["waiting_for"] == "script missing"
    people = daemon.ys("ps")
    assert "waiting: script broken (SyntaxError" in people.stdout, people.stdout
    assert "waiting: script missing" in people.stdout, people.stdout
    shown = daemon.ys("describe", "g-1")
    assert "waiting: script missing" in shown.stdout, shown.stdout
    described = json.loads(daemon.ys("describe", "f-1", "--json").stdout)
    assert described["waiting_for"].startswith("script broken (SyntaxError")
    metrics = c.metrics()
    assert "ys_script_waiting_executions 2.0" in metrics, metrics
