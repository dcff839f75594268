"""The run environment options (`cwd`, `env_file`, `nice`, `memory_max`) in a shell header and
a decorator, against a real daemon: what the worker gets, a bad option as the script's load
error (its executions wait), and a delivery past its memory_max failing MemoryLimitExceeded."""

from __future__ import annotations

import json
import os
import textwrap

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


def test_doctor_says_which_memory_limit_this_box_offers(shared):
    checks = json.loads(shared.ys("doctor", "--json").stdout)["checks"]  # 1: bad scripts here
    memory = next(c for c in checks if c["name"] == "memory limit")
    assert "RLIMIT_AS" in memory["detail"], memory
    assert os.path.exists("/sys/fs/cgroup")


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
