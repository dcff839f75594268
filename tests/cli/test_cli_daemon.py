"""`ys daemon run|start|stop|status`, an unreachable daemon (exit 5), and autostart: one
daemon for two concurrent first commands; never from --help or a completion request."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from cli_support import _alive, daemons_for, one_error_line, out_json, stop_pids, wait_until


def test_status_json_gives_pid_version_uptime_and_paths(fresh):
    info = out_json(fresh.ys("daemon", "status", "--json"))
    assert {"version", "pid", "started_at", "uptime_seconds", "paths"} <= set(info)
    assert info["pid"] == fresh.proc.pid
    assert info["paths"]["socket"] == str(fresh.socket)
    people = fresh.ys("daemon", "status")
    assert str(fresh.proc.pid) in people.stdout and str(fresh.socket) in people.stdout


def test_no_daemon_exits_5_and_says_how_to_start_one(ys_home):
    for args in (["daemon", "status"], ["get", "x", "--json"], ["list"], ["trigger", "hello"]):
        result = ys_home.ys(*args)
        assert (result.returncode, result.stdout) == (5, ""), args
        assert "start it with `ys daemon start`" in one_error_line(result, "DAEMON_UNAVAILABLE")
    stop = ys_home.ys("daemon", "stop")
    assert stop.returncode == 5
    assert "nothing to stop" in one_error_line(stop, "DAEMON_UNAVAILABLE")
    assert not ys_home.socket.exists()  # YS_AUTOSTART=0: nothing was started


def test_start_prints_the_pid_once_it_answers_and_stop_returns_once_it_exited(ys_home):
    pid = None
    try:
        started = out_json(ys_home.ys("daemon", "start", "--json"))
        pid = started["pid"]
        assert started["started"] is True
        again = ys_home.ys("daemon", "start")
        assert again.stdout == f"{pid}\n" and "already runs" in again.stderr
        assert out_json(ys_home.ys("daemon", "status", "--json"))["pid"] == pid
        assert out_json(ys_home.ys("daemon", "stop", "--json")) == {"pid": pid, "stopped": True}
        assert not _alive(pid)
        assert ys_home.ys("daemon", "status").returncode == 5
    finally:
        if pid is not None:
            stop_pids([pid])


def test_start_with_settings_while_a_daemon_runs_says_they_are_not_applied_and_how(fresh):
    before = out_json(fresh.ys("daemon", "status", "--json"))
    result = fresh.ys("daemon", "start", "--concurrency", "2")
    assert (result.returncode, result.stdout) == (0, f"{fresh.proc.pid}\n"), result.stderr
    (line,) = result.stderr.splitlines()
    assert "already runs" in line and "keeps its settings" in line and "--concurrency 2" in line
    assert "ys daemon stop && ys daemon start --concurrency 2" in line
    as_json = out_json(fresh.ys("daemon", "start", "--concurrency", "2", "--json"))
    assert as_json["started"] is False and as_json["not_applied"] == ["--concurrency"]
    after = out_json(fresh.ys("daemon", "status", "--json"))
    assert after["pid"] == before["pid"] and after["concurrency"] == before["concurrency"] != 2
    plain = fresh.ys("daemon", "start")  # nothing asked: nothing to say but that it runs
    assert "keeps its settings" not in plain.stderr and "already runs" in plain.stderr


def test_daemon_run_serves_in_the_foreground_until_sigterm(ys_home):
    proc = subprocess.Popen(
        [sys.executable, "-m", "ys", "daemon", "run", "--concurrency", "2"],
        env=ys_home.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        info = wait_until(
            lambda: (
                (r := ys_home.ys("daemon", "status", "--json")).returncode == 0
                and json.loads(r.stdout)
            ),
            message="the daemon to answer",
        )
        assert info["pid"] == proc.pid and info["concurrency"] == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_two_concurrent_first_commands_start_exactly_one_daemon(autostart_home):
    argv = [sys.executable, "-m", "ys", "get", "no-such-execution", "--json"]
    procs = [
        subprocess.Popen(
            argv, env=autostart_home.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=60), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    for p in procs:
        p.stdout.close()  # type: ignore[union-attr]
        p.stderr.close()  # type: ignore[union-attr]
    # Both reached a daemon (not found is the daemon's answer), and only one daemon runs.
    assert [code for code, _ in results] == [4, 4], results
    running = daemons_for(autostart_home.home)
    assert len(running) == 1, running
    status = out_json(autostart_home.ys("daemon", "status", "--json"))
    assert status["pid"] == running[0]


def test_help_and_completion_never_start_the_daemon(autostart_home):
    for args in (["--help"], ["get", "--help"], ["daemon", "start", "--help"], ["--version"]):
        assert autostart_home.ys(*args).returncode == 0, args
    completion = autostart_home.ys(
        env={"_YS_COMPLETE": "bash_complete", "COMP_WORDS": "ys get ", "COMP_CWORD": "2"}
    )
    assert completion.returncode == 0
    workflow = autostart_home.ys(
        env={"_YS_COMPLETE": "bash_complete", "COMP_WORDS": "ys trigger he", "COMP_CWORD": "2"}
    )
    assert workflow.returncode == 0
    assert daemons_for(autostart_home.home) == []
    assert not autostart_home.socket.exists()


def test_a_command_starts_the_daemon_when_none_answers(autostart_home):
    assert "YS_AUTOSTART" not in autostart_home.env and "YS_AUTOSTART" not in os.environ
    result = autostart_home.ys("workflows", "--json")
    assert result.returncode == 0, result.stderr
    assert "hello" in {w["name"] for w in json.loads(result.stdout)["workflows"]}
    assert len(daemons_for(autostart_home.home)) == 1
