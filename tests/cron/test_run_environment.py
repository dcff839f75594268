"""The run environment options (`cwd`, `env_file`, `nice`, `memory_max`) in a shell header and
a decorator, against a real daemon: what the worker gets, a bad option as the script's load
error (its executions wait), and a delivery past its memory_max failing MemoryLimitExceeded."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from cron_support import make_home, out_json, shell, wait_status, wait_until

PY_ENV = """
import os
import ys

@ys.workflow(cwd={cwd!r}, env_file={env!r}, nice=7, memory_max="512M")
def main(step, params):
    import resource
    return [os.getcwd(), os.environ.get("GREETING"), os.environ.get("QUOTED"), os.nice(0),
            resource.getrlimit(resource.RLIMIT_AS)[0]]
"""

HOG = """
import ys

@ys.workflow(memory_max="64M")
def main(step, params):
    hog = bytearray(200 * 1024 * 1024)
    return len(hog)
"""


def trigger(daemon, workflow: str) -> str:
    with daemon.client() as c:
        return c.trigger(workflow, {})["execution_id"]


def listed(daemon, *names: str) -> dict[str, dict]:
    def listing() -> dict[str, dict] | None:
        found = {w["name"]: w for w in out_json(daemon.ys("workflows", "--json"))["workflows"]}
        return found if all(n in found for n in names) else None

    found: dict[str, dict] = wait_until(listing, message=f"the registry to list {names}")
    return found


@pytest.fixture
def env_file(tmp_path):
    f = tmp_path / "backup.env"
    f.write_text('# the backup\'s settings\n\nGREETING=hello there\nQUOTED="a # b"\n')
    return f


def test_a_shell_header_sets_the_run_environment(shared, tmp_path, env_file):
    shell(
        shared,
        "envopts",
        f"# ys: cwd={tmp_path} nice=10 memory_max=256M env_file={env_file}\n"
        'echo "$(pwd)|$GREETING|$QUOTED|$(nice)|$(ulimit -v)"',
    )
    wf = listed(shared, "envopts")["envopts"]
    assert wf["error"] is None, wf
    assert (wf["cwd"], wf["env_file"], wf["nice"], wf["memory_max"]) == (
        str(tmp_path),
        str(env_file),
        10,
        256 << 20,
    )
    sh = wait_status(shared, trigger(shared, "envopts"), "completed", "failed")
    assert sh["status"] == "completed", sh
    assert sh["outcome"]["result"]["last_line"] == f"{tmp_path}|hello there|a # b|10|262144"
    # read at each delivery: an edit is seen by the next one
    env_file.write_text("GREETING=changed\n")
    sh = wait_status(shared, trigger(shared, "envopts"), "completed", "failed")
    assert sh["outcome"]["result"]["last_line"] == f"{tmp_path}|changed||10|262144"


@pytest.mark.parametrize("launcher", ["warm", "spawn"])
def test_a_decorator_sets_the_run_environment(tmp_path, env_file, launcher):
    h = make_home(tmp_path, YS_LAUNCHER=launcher)
    try:
        h.start()
        h.write("pyenv.py", textwrap.dedent(PY_ENV.format(cwd=str(tmp_path), env=str(env_file))))
        assert listed(h, "pyenv")["pyenv"]["error"] is None
        py = wait_status(h, trigger(h, "pyenv"), "completed", "failed")
        assert py["status"] == "completed", py
        assert py["outcome"]["result"] == [str(tmp_path), "hello there", "a # b", 7, 512 << 20]
    finally:
        h.stop()


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("env_file=/no/such/backup.env", "bad env_file"),
        ("memory_max=lots", "bad memory_max"),
        ("nice=25", "bad nice"),
        ("cwd=/etc/hostname", "bad cwd"),
    ],
)
def test_a_bad_run_environment_option_is_the_load_error_and_executions_wait(shared, header, why):
    name = "bad" + why.split()[1].replace("_", "")
    shell(shared, name, f"# ys: {header}\necho ran")
    wait_until(
        lambda: why in (listed(shared, name)[name]["error"] or ""), message=f"{name}'s error"
    )
    people = shared.ys("workflows")
    assert people.returncode == 0 and why in people.stdout, people.stdout
    execution_id = trigger(shared, name)
    assert wait_status(shared, execution_id, "admitted")["status"] == "admitted"
    assert shared.ys("daemon", "status").returncode == 0  # the daemon serves on


def test_workflows_check_exits_2_naming_each_bad_run_environment_option(tmp_path):
    h = make_home(tmp_path)
    try:
        h.start()
        fine = h.ys("workflows", "--check")
        assert fine.returncode == 0 and fine.stderr == "", fine.stderr
        h.write(
            "lots.py",
            'import ys\n\n@ys.workflow(memory_max="lots")\ndef main(step, params):\n    pass\n',
        )
        shell(h, "noenv", "# ys: env_file=/no/such/backup.env\necho ran")
        wait_until(
            lambda: all(listed(h, "lots", "noenv")[n]["error"] for n in ("lots", "noenv")),
            message="both load errors",
        )
        for argv in (("workflows", "--check"), ("workflows", "--check", "--json")):
            r = h.ys(*argv)
            assert r.returncode == 2, (argv, r.stderr)
            assert r.stderr.count("\n") == 1 and r.stderr.startswith("INVALID_ARGUMENT: 2 script")
            assert "lots: bad memory_max: 'lots' must be a size such as 512M or 2G" in r.stderr
            assert "noenv: bad env_file: /no/such/backup.env: No such file or directory" in r.stderr
            assert "noenv" in r.stdout  # the listing is printed all the same
        assert json.loads(r.stdout)["workflows"]
        assert h.ys("workflows").returncode == 0  # listing alone: not a check
        assert out_json(h.ys("list", "--json"))["executions"] == []  # nothing made
    finally:
        h.stop()


@pytest.mark.parametrize("launcher", ["warm", "spawn"])
def test_a_delivery_past_its_memory_max_fails_memory_limit_exceeded(tmp_path, launcher):
    h = make_home(tmp_path, YS_LAUNCHER=launcher)
    try:
        h.start()
        h.write("hog.py", textwrap.dedent(HOG))
        assert listed(h, "hog")["hog"]["memory_max"] == 64 << 20
        record = wait_status(h, trigger(h, "hog"), "completed", "failed", timeout=30)
        assert record["status"] == "failed", record
        assert record["outcome"]["error"]["name"] == "MemoryLimitExceeded", record
    finally:
        h.stop()


def test_doctor_says_which_memory_limit_this_box_offers(shared, tmp_path):
    checks = json.loads(shared.ys("doctor", "--json").stdout)["checks"]  # 1: bad scripts here
    memory = next(c for c in checks if c["name"] == "memory limit")
    with shared.client() as c:
        chosen = c.version()["memory_limit"]
    assert chosen["detail"].startswith(chosen["mechanism"]), chosen
    assert memory["detail"] == f"memory_max: {chosen['detail']} (the daemon's)", memory
    assert chosen == {  # (the tests' daemons are kept off this box's cgroups: tests/support.py)
        "mechanism": "RLIMIT_AS",
        "detail": f"RLIMIT_AS per process: no cgroup v2 hierarchy at {shared.env['YS_CGROUP_ROOT']} "
        "(cgroup v1, or none)",
    }
    # no daemon: what one started from here would use
    idle = make_home(tmp_path)
    checks = json.loads(idle.ys("doctor", "--json").stdout)["checks"]
    memory = next(c for c in checks if c["name"] == "memory limit")
    assert memory["detail"].startswith("memory_max: ") and memory["detail"].endswith(
        "(a daemon started from here)"
    ), memory


DIES = """
import os
import ys

@ys.workflow(memory_max="64M", max_attempts=2)
def main(step, params):
    try:
        bytearray(200 * 1024 * 1024)
    except MemoryError:  # as a process that cannot report it: it dies
        print("MemoryError: cannot go on", flush=True)
        os._exit(1)
"""


def test_a_worker_dying_past_its_memory_max_counts_toward_max_attempts(shared):
    shared.write("dies.py", textwrap.dedent(DIES))
    assert listed(shared, "dies")["dies"]["error"] is None
    record = wait_status(shared, trigger(shared, "dies"), "failed", timeout=60)
    error = record["outcome"]["error"]
    assert error["name"] == "DeliveryAttemptsExhausted", record
    assert "2 deliveries" in error["message"] and "MemoryLimitExceeded" in error["message"], error


# -- cgroup v2 (this box mounts cgroup v1): a daemon given a folder laid out as cgroupfs ------

IN_CGROUP = """
import glob, os, resource
import ys

@ys.workflow(memory_max="64M", max_attempts=2)
def main(step, params):
    mine = [p for p in glob.glob({root!r} + "/ys-worker-*/cgroup.procs")
            if open(p).read() == str(os.getpid())]
    scope = os.path.dirname(mine[0])
    if params.get("oom"):  # as the kernel does past memory.max: counted, then the kill
        with open(scope + "/memory.events", "w") as f:
            f.write("low 0\\nhigh 0\\nmax 9\\noom 1\\noom_kill 1\\n")
        os.kill(os.getpid(), 9)
    return [os.path.basename(scope), open(scope + "/memory.max").read(),
            resource.getrlimit(resource.RLIMIT_AS)[0]]
"""

SHELL_OOM = """# ys: memory_max=32M max_attempts=2
scope=$(grep -lx "$$" {root}/ys-worker-*/cgroup.procs | xargs dirname)
printf 'oom 1\\noom_kill 1\\n' > "$scope/memory.events"
kill -9 $$
"""


def fake_cgroupfs(tmp_path) -> str:
    """A unified hierarchy with the memory controller, the daemon's cgroup (the test's own,
    which it inherits) delegated and holding no other process."""
    from ys.daemon.cgroups import own_cgroup

    root = tmp_path / "cgroup"
    home = root / (own_cgroup() or "/").lstrip("/")
    home.mkdir(parents=True, exist_ok=True)
    for folder in {root, home}:
        (folder / "cgroup.controllers").write_text("cpu io memory pids\n")
        (folder / "cgroup.subtree_control").write_text("")
        (folder / "cgroup.procs").write_text("")
    return str(home)


@pytest.mark.parametrize("launcher", ["warm", "spawn"])
def test_where_cgroup_v2_is_delegated_each_worker_runs_in_its_own(tmp_path, launcher):
    home = fake_cgroupfs(tmp_path)
    h = make_home(tmp_path, YS_LAUNCHER=launcher, YS_CGROUP_ROOT=str(tmp_path / "cgroup"))
    try:
        h.start()
        assert Path(home, "cgroup.subtree_control").read_text() == "+memory"
        assert Path(home, "ys-daemon", "cgroup.procs").read_text() == str(h.proc.pid)
        with h.client() as c:
            assert c.version()["memory_limit"] == {
                "mechanism": "cgroup v2",
                "detail": f"cgroup v2: a cgroup per worker under {home}",
            }
        doctor = json.loads(h.ys("doctor", "--json").stdout)["checks"]
        memory = next(c for c in doctor if c["name"] == "memory limit")
        assert (
            memory["detail"]
            == f"memory_max: cgroup v2: a cgroup per worker under {home} (the daemon's)"
        )
        h.write("incg.py", textwrap.dedent(IN_CGROUP.format(root=home)))
        assert listed(h, "incg")["incg"]["error"] is None
        record = wait_status(h, trigger(h, "incg"), "completed", "failed")
        assert record["status"] == "completed", record
        scope, limit, rlimit = record["outcome"]["result"]
        assert scope.startswith(f"ys-worker-{h.proc.pid}-") and limit == str(64 << 20)
        assert rlimit == -1  # the cgroup holds it, not RLIMIT_AS
        # the daemon tried to remove it (a plain folder here: it kills what is left instead)
        assert wait_until(lambda: os.path.exists(f"{home}/{scope}/cgroup.kill"))
    finally:
        h.stop()


def test_a_worker_its_cgroup_killed_past_memory_max_fails_memory_limit_exceeded(tmp_path):
    home = fake_cgroupfs(tmp_path)
    h = make_home(tmp_path, YS_CGROUP_ROOT=str(tmp_path / "cgroup"))
    try:
        h.start()
        h.write("incg.py", textwrap.dedent(IN_CGROUP.format(root=home)))
        shell(h, "shoom", SHELL_OOM.format(root=home))
        assert listed(h, "incg", "shoom")["shoom"]["error"] is None
        with h.client() as c:
            ids = [
                c.trigger("incg", {"oom": True})["execution_id"],
                c.trigger("shoom", {})["execution_id"],
            ]
        for execution_id in ids:  # a shell script too: released, not failed ExitStatus
            record = wait_status(h, execution_id, "completed", "failed", timeout=60)
            error = record["outcome"]["error"]
            assert error["name"] == "DeliveryAttemptsExhausted", record
            assert "2 deliveries" in error["message"], error
            assert "MemoryLimitExceeded: past its memory_max" in error["message"], error
    finally:
        h.stop()
