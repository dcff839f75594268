"""memory_max through cgroup v2 (ys.daemon.cgroups) against a folder laid out as cgroupfs is:
which mechanism a box gets and why, the files the daemon writes, a worker entering its cgroup
before it runs anything, the oom_kill read and the cleanup. (This box mounts cgroup v1; the
e2e tests in tests/cron/test_run_environment.py run RLIMIT_AS for real.)"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ys import runenv
from ys.daemon.cgroups import LEAF, ROOT, MemoryCgroups, oom_kills, own_cgroup, probe
from ys.daemon.launcher import SpawnLauncher
from ys.daemon.registry import Workflow
from ys.daemon.scripts import WorkflowOptions

ME = os.getpid()
SERVICE = "/user.slice/user-1000.slice/user@1000.service/app.slice/ys.service"


def cgroupfs(tmp_path: Path, controllers: str = "cpu io memory pids", procs=(ME,)):
    """A unified hierarchy at tmp_path/cgroup with the daemon's own cgroup at SERVICE."""
    root = tmp_path / "cgroup"
    home = root / SERVICE.lstrip("/")
    home.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (home / "cgroup.controllers").write_text(controllers + "\n")
    (home / "cgroup.procs").write_text("".join(f"{p}\n" for p in procs))
    (home / "cgroup.subtree_control").write_text("")
    return root, home


def cgroup_rmdir(path: Path) -> None:
    """cgroupfs's rmdir: refused while a process is in the cgroup; its files go with it."""
    procs = path / "cgroup.procs"
    if procs.exists() and procs.read_text().split():
        raise OSError(errno.EBUSY, "Device or resource busy", str(path))
    shutil.rmtree(path)


def exits(procs: Path) -> None:
    """What the kernel does to a cgroup.procs when its last process exits."""
    procs.write_text("")


def test_cgroup_v2_is_used_where_the_daemons_own_cgroup_is_delegated_with_memory(tmp_path):
    root, home = cgroupfs(tmp_path)
    choice = probe(root, SERVICE, ME)
    assert (choice.mechanism, choice.home) == ("cgroup v2", home)
    assert choice.detail == f"cgroup v2: a cgroup per worker under {home}"
    # a daemon already in its leaf divides the leaf's parent
    assert probe(root, SERVICE + "/" + LEAF, ME).home == home


@pytest.mark.parametrize(
    ("layout", "why"),
    [
        ("v1", "no cgroup v2 hierarchy at"),
        ("no memory", "the memory controller is not delegated to"),
        ("not writable", "is not delegated to this user (not writable)"),
        ("shared", "holds other processes too (pid 1), so it cannot give its children"),
    ],
)
def test_rlimit_as_elsewhere_saying_why(tmp_path, layout, why):
    root, home = cgroupfs(
        tmp_path,
        controllers="cpu io pids" if layout == "no memory" else "cpu io memory pids",
        procs=(1, ME) if layout == "shared" else (ME,),
    )
    if layout == "v1":  # /sys/fs/cgroup holds one folder per v1 controller, no root files
        (root / "cgroup.controllers").unlink()
    if layout == "not writable":
        (home / "cgroup.subtree_control").unlink()
    choice = probe(root, SERVICE, ME)
    assert choice.mechanism == "RLIMIT_AS" and choice.home is None
    assert choice.detail.startswith("RLIMIT_AS per process: ") and why in choice.detail, choice
    made = MemoryCgroups.set_up(root, SERVICE, ME, rmdir=cgroup_rmdir)
    assert made.choice == choice and made.open(64 << 20) is None
    assert not (home / LEAF).exists() and (home / "cgroup.subtree_control").exists() == (
        layout != "not writable"
    )


@pytest.mark.skipif(os.path.exists("/sys/fs/cgroup/cgroup.controllers"), reason="cgroup v2 box")
def test_this_cgroup_v1_box_gets_rlimit_as():
    choice = probe(ROOT, own_cgroup(), ME)
    assert (
        choice.detail == "RLIMIT_AS per process: no cgroup v2 hierarchy at /sys/fs/cgroup "
        "(cgroup v1, or none)"
    )


def test_a_process_in_no_cgroup_v2_gets_rlimit_as(tmp_path):
    root, _ = cgroupfs(tmp_path)
    assert probe(root, None, ME).mechanism == "RLIMIT_AS"


def test_the_root_cgroup_may_hold_other_processes(tmp_path):
    """Only the root is exempt from "no processes beside children with controllers"."""
    root, _ = cgroupfs(tmp_path)
    (root / "cgroup.procs").write_text("1\n2\n")
    (root / "cgroup.subtree_control").write_text("")
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    assert probe(root, "/", ME).home == root


def test_set_up_moves_the_daemon_into_its_leaf_and_gives_children_memory(tmp_path):
    root, home = cgroupfs(tmp_path)
    made = MemoryCgroups.set_up(root, SERVICE, ME, rmdir=cgroup_rmdir)
    assert made.mechanism == "cgroup v2"
    assert (home / LEAF / "cgroup.procs").read_text() == str(ME)
    assert (home / "cgroup.subtree_control").read_text() == "+memory"


def test_set_up_keeps_rlimit_as_when_the_kernel_refuses(tmp_path):
    root, home = cgroupfs(tmp_path)
    (home / "cgroup.subtree_control").unlink()
    (home / "cgroup.subtree_control").mkdir()  # a write to it fails
    made = MemoryCgroups.set_up(root, SERVICE, ME, rmdir=cgroup_rmdir)
    assert made.mechanism == "RLIMIT_AS" and made.open(1 << 20) is None
    assert f"{home} refused its memory controller to children" in made.choice.detail


def test_set_up_removes_worker_cgroups_of_daemons_gone_only(tmp_path):
    root, home = cgroupfs(tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    (home / f"ys-worker-{gone.pid}-3").mkdir()
    (home / f"ys-worker-{gone.pid}-4").mkdir()  # a crashed worker's, still running
    (home / f"ys-worker-{gone.pid}-4" / "cgroup.procs").write_text("12345\n")
    (home / "ys-worker-1-1").mkdir()  # pid 1 lives: another daemon's
    MemoryCgroups.set_up(root, SERVICE, ME, rmdir=cgroup_rmdir)
    left = {p.name for p in home.glob("ys-worker-*")}
    assert left == {f"ys-worker-{gone.pid}-4", "ys-worker-1-1"}


def test_each_worker_gets_a_cgroup_with_its_memory_max_removed_after_it(tmp_path):
    root, home = cgroupfs(tmp_path)
    made = MemoryCgroups.set_up(root, SERVICE, ME, rmdir=cgroup_rmdir)
    assert made.open(None) is None  # no memory_max: no cgroup
    one, two = made.open(64 << 20), made.open(1 << 30)
    assert one == home / f"ys-worker-{ME}-1" and two == home / f"ys-worker-{ME}-2"
    assert (one / "memory.max").read_text() == str(64 << 20)
    assert (one / "memory.oom.group").read_text() == "1"  # past it, the whole delivery ends
    assert (two / "memory.max").read_text() == str(1 << 30)
    (one / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    (two / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n")
    assert made.close(one) is True and not one.exists()
    assert made.close(two) is False and not two.exists()


def test_a_cgroup_still_holding_processes_is_killed_and_removed_later(tmp_path):
    root, home = cgroupfs(tmp_path)
    made = MemoryCgroups.set_up(root, SERVICE, ME, rmdir=cgroup_rmdir)
    scope = made.open(1 << 20)
    assert scope is not None
    (scope / "cgroup.procs").write_text("4242\n")  # a child that escaped the process group
    assert made.close(scope) is False
    assert (scope / "cgroup.kill").read_text() == "1" and scope.exists()
    exits(scope / "cgroup.procs")
    later = made.open(1 << 20)
    assert later is not None
    made.close(later)
    assert not scope.exists() and not later.exists()


def test_oom_kills_are_read_from_memory_events(tmp_path):
    assert oom_kills(tmp_path) == 0
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    assert oom_kills(tmp_path) == 2


SHOW = 'cat "$1/cgroup.procs"; echo; ulimit -v; echo $$\n'


def _run_shell(tmp_path: Path, cgroup: Path | None) -> list[str]:
    """A shell workflow with memory_max=64M started by the spawn launcher; its output."""
    script = tmp_path / "show.sh"
    script.write_text(f"#!/bin/sh\nset -- {cgroup or '/nowhere'}\n{SHOW}")
    script.chmod(0o755)
    wf = Workflow("show", "shell", str(script), options=WorkflowOptions(memory_max=64 << 20))

    async def main() -> bytes:
        worker = await SpawnLauncher().launch(wf, {}, tmp_path / "1.log", cgroup=cgroup)
        assert worker.stdout is not None and worker.lifeline is not None
        await worker.proc.wait()
        os.close(worker.lifeline)
        os.close(worker.output)
        with os.fdopen(worker.stdout, "rb") as f:
            return f.read()

    return asyncio.run(main()).decode().split("\n")


def test_a_worker_enters_its_cgroup_before_it_runs_and_gets_no_rlimit_as(tmp_path):
    scope = tmp_path / "ys-worker-1-1"
    scope.mkdir()
    procs, ulimit, pid, _ = _run_shell(tmp_path, scope)
    assert procs == pid  # the script's pid was in its cgroup before its first line ran
    assert ulimit == "unlimited"  # memory.max holds it, not RLIMIT_AS


def test_a_worker_refused_its_cgroup_gets_rlimit_as(tmp_path):
    _, ulimit, _, _ = _run_shell(tmp_path, tmp_path / "ys-worker-gone")
    assert ulimit == str(64 << 10)  # KiB


def test_apply_limits_without_a_cgroup_sets_rlimit_as(tmp_path):
    code = (
        "import resource, sys; from ys import runenv; "
        "runenv.apply_limits(None, 64 << 20, sys.argv[1] if len(sys.argv) > 1 else None); "
        "print(resource.getrlimit(resource.RLIMIT_AS)[0], runenv.memory_limited())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(64 << 20), "True"]
    scope = tmp_path / "scope"
    scope.mkdir()
    argv = [sys.executable, "-c", code, str(scope)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(-1), "False"]
    assert (scope / "cgroup.procs").read_text().isdigit()
    assert runenv.MEMORY_LIMIT_ERROR == "MemoryLimitExceeded"
