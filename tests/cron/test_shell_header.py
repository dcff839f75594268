"""What a shell workflow's `# ys:` header declares (every header line, a schedule's params, the
machine's zone), `ys step params --default`, and the environment a workflow runs in, as the
README and `ys step --help` describe it: checked against a real daemon."""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path

from cron_support import out_json, shell, wait_status, wait_until


def trigger(daemon, workflow: str, **params) -> str:
    with daemon.client() as c:
        return c.trigger(workflow, params)["execution_id"]


def listed(daemon, *names: str) -> dict[str, dict]:
    def listing() -> dict[str, dict] | None:
        found = {w["name"]: w for w in out_json(daemon.ys("workflows", "--json"))["workflows"]}
        return found if all(n in found for n in names) else None

    found: dict[str, dict] = wait_until(listing, message=f"the registry to list {names}")
    return found


def schedules(daemon) -> dict[str, dict]:
    return {s["name"]: s for s in out_json(daemon.ys("schedule", "list", "--json"))["schedules"]}


def test_every_header_line_is_read(shared):
    shell(shared, "twolines", '# ys: schedule="0 3 * * *" tz=UTC\n# ys: timeout=2s\necho hi')
    wf = listed(shared, "twolines")["twolines"]
    assert wf["error"] is None and wf["timeout"] == 2, wf
    assert schedules(shared)["twolines"]["cron"] == "0 3 * * *"


def test_a_key_given_on_two_header_lines_is_the_load_error_naming_both(shared):
    shell(shared, "twice", "# ys: timeout=1m\n# ys: pin timeout=2m\necho hi")
    error = listed(shared, "twice")["twice"]["error"] or ""
    # the script's lines 3 and 4 (after `#!/bin/sh` and `set -e`)
    assert "timeout" in error and "line 3" in error and "line 4" in error, error


def test_a_header_schedule_carries_its_params(shared):
    shell(
        shared, "nightly", """# ys: schedule="0 3 * * *" params='{"dir": "/srv", "n": 2}'\necho"""
    )
    assert listed(shared, "nightly")["nightly"]["error"] is None
    assert schedules(shared)["nightly"]["params"] == {"dir": "/srv", "n": 2}


def test_bad_header_params_are_the_load_error(shared):
    shell(shared, "listy", "# ys: schedule=\"0 3 * * *\" params='[1]'\necho")
    shell(shared, "broken", "# ys: schedule=\"0 3 * * *\" params='{oops'\necho")
    shell(shared, "alone", "# ys: params='{\"a\": 1}'\necho")
    found = listed(shared, "listy", "broken", "alone")
    for name in ("listy", "broken", "alone"):
        assert "bad params" in (found[name]["error"] or ""), found[name]
    assert "schedule" in found["alone"]["error"]


def test_a_decorator_schedule_carries_its_params(shared):
    shared.write(
        "pyparams.py",
        textwrap.dedent(
            """
            import ys

            @ys.workflow(schedule="0 3 * * *", tz="UTC", params={"n": 5})
            def main(step, params):
                return params
            """
        ),
    )
    assert listed(shared, "pyparams")["pyparams"]["error"] is None
    assert schedules(shared)["pyparams"]["params"] == {"n": 5}


def test_step_params_default_is_printed_when_the_param_is_absent(shared, tmp_path):
    out = tmp_path / "out"
    shell(
        shared,
        "defaults",
        f"""
        ys step params dir --default /tmp/x >> {out}
        ys step params n --default 3 >> {out}
        YS_NO_FAST_PATH=1 ys step params dir --default /typer >> {out}
        if ys step params dir 2>> {out}.err; then echo unexpected >> {out}; fi
        """,
    )
    record = wait_status(shared, trigger(shared, "defaults", n=7), "completed", "failed")
    assert record["status"] == "completed", record
    assert out.read_text().splitlines() == ["/tmp/x", "7", "/typer"]
    assert "NOT_FOUND" in (tmp_path / "out.err").read_text()


def test_header_and_cli_schedules_without_a_zone_show_the_machines_by_name(shared):
    shell(shared, "zoneless", '# ys: schedule="0 4 * * *"\necho')
    assert listed(shared, "zoneless")["zoneless"]["error"] is None
    out_json(shared.ys("schedule", "add", "byhand", "hello", "--cron", "0 4 * * *", "--json"))
    found = schedules(shared)
    assert found["zoneless"]["tz"] == found["byhand"]["tz"] != "local"
    shown = shared.ys("schedule", "list").stdout
    assert "local" not in shown and found["byhand"]["tz"] in shown


def test_a_workflow_runs_in_the_documented_environment(shared, tmp_path):
    """README "What environment a workflow gets": cwd the workflows folder, umask 022, stdin
    /dev/null, the daemon's environment and the delivery's YS_* variables."""
    made = tmp_path / "made-by-shell"
    shell(
        shared,
        "envsh",
        f"""
        touch {made}
        [ -t 0 ] && tty=yes || tty=no
        echo "$(pwd)|$(umask)|$(readlink /proc/self/fd/0)|$tty|$YS_HOME|$YS_ATTEMPT|$YS_EXECUTION_ID"
        """,
    )
    shared.write(
        "envpy.py",
        textwrap.dedent(
            f"""
            import os, sys
            import ys

            @ys.workflow
            def main(step, params):
                mask = os.umask(0)
                os.umask(mask)
                open({str(tmp_path / "made-by-python")!r}, "w").close()
                return [os.getcwd(), oct(mask), os.readlink("/proc/self/fd/0"),
                        sys.stdin.isatty(), os.environ.get("YS_HOME"),
                        os.environ.get("YS_EXECUTION_ID")]
            """
        ),
    )
    folder = str(shared.workflows.resolve())
    sh_id, py_id = trigger(shared, "envsh"), trigger(shared, "envpy")
    sh = wait_status(shared, sh_id, "completed", "failed")
    assert sh["status"] == "completed", sh
    line = sh["outcome"]["result"]["last_line"]
    assert line == f"{folder}|0022|/dev/null|no|{shared.env['YS_HOME']}|1|{sh_id}"
    py = wait_status(shared, py_id, "completed", "failed")
    assert py["outcome"]["result"] == [
        folder,
        "0o22",
        "/dev/null",
        False,
        shared.env["YS_HOME"],
        py_id,
    ], py
    for f in (made, tmp_path / "made-by-python"):
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o644, f
    # the daemon's own files stay private
    assert stat.S_IMODE(os.stat(shared.socket).st_mode) == 0o600


def test_the_environment_is_documented_where_users_look(shared):
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## What environment a workflow gets", 1)[1].split("\n## ", 1)[0]
    help_text = " ".join(shared.ys("step", "--help").stdout.split())
    for words in ("/dev/null", "umask", "022", "workflows folder", "YS_EXECUTION_ID", "YS_ATTEMPT"):
        assert words in section and words in help_text, words


def test_a_umask_option_sets_a_workflows_umask(shared):
    shell(shared, "private", "# ys: umask=077\numask")
    shell(shared, "badmask", "# ys: umask=999\numask")
    shared.write(
        "pyprivate.py",
        textwrap.dedent(
            """
            import os
            import ys

            @ys.workflow(umask="027")
            def main(step, params):
                mask = os.umask(0)
                os.umask(mask)
                return oct(mask)
            """
        ),
    )
    assert "bad umask" in (listed(shared, "badmask")["badmask"]["error"] or "")
    assert listed(shared, "pyprivate")["pyprivate"]["error"] is None
    sh = wait_status(shared, trigger(shared, "private"), "completed", "failed")
    assert sh["outcome"]["result"]["last_line"] == "0077", sh
    py = wait_status(shared, trigger(shared, "pyprivate"), "completed", "failed")
    assert py["outcome"]["result"] == "0o27", py
