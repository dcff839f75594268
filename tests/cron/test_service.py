"""`ys daemon install|uninstall`: the systemd user unit (or launchd agent) written under a
temporary config home, what it runs, and its removal. Neither needs a daemon: the home here
has none and YS_AUTOSTART=0, so any attempt to reach one would fail the command."""

from __future__ import annotations

import json
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ys.commands import service

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd is Linux's")


@pytest.fixture
def config(ys_home, tmp_path) -> Path:
    ys_home.env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    ys_home.env["YS_DB"] = str(ys_home.home / "other.db")
    return tmp_path / "xdg"


@linux
def test_install_writes_a_user_unit_that_runs_this_daemon_and_uninstall_removes_it(ys_home, config):
    result = ys_home.ys("daemon", "install")
    assert result.returncode == 0, result.stderr
    unit = config / "systemd" / "user" / "ys.service"
    assert result.stdout == f"{unit}\n"
    assert "systemctl --user daemon-reload && systemctl --user enable --now ys" in result.stderr
    assert "loginctl enable-linger" in result.stderr
    lines = unit.read_text().splitlines()
    assert f"ExecStart={sys.executable} -m ys.daemon run" in lines
    assert "Restart=on-failure" in lines and "WantedBy=default.target" in lines
    # exit 3 is also a server not reachable at start (a boot before PostgreSQL): restarted
    assert not any(line.startswith("RestartPreventExitStatus") for line in lines)
    assert "Delegate=memory" in lines  # memory_max through cgroup v2 (ys.daemon.cgroups)
    assert f"Environment=YS_HOME={ys_home.home}" in lines
    assert f"Environment=YS_WORKFLOWS={ys_home.workflows}" in lines
    assert f"Environment=YS_DB={ys_home.home / 'other.db'}" in lines
    assert not any(line.startswith("Environment=YS_SOCKET") for line in lines)  # not set
    assert not ys_home.socket.exists()  # no daemon was started

    again = json.loads(ys_home.ys("daemon", "install", "--json").stdout)
    assert again["path"] == str(unit) and again["manager"] == "systemd"
    assert again["replaced"] is True and again["exec"] == [sys.executable, "-m", "ys.daemon", "run"]

    removed = ys_home.ys("daemon", "uninstall")
    assert removed.returncode == 0 and not unit.exists()
    assert "removed" in removed.stderr and "systemctl --user stop ys" in removed.stderr
    none = ys_home.ys("daemon", "uninstall")
    assert none.returncode == 0 and "no ys service is installed" in none.stderr
    assert json.loads(ys_home.ys("daemon", "uninstall", "--json").stdout)["removed"] is False


@linux
def test_the_unit_quotes_paths_with_spaces_and_percent_signs(ys_home, config, tmp_path):
    odd = tmp_path / 'a "b" 100%'
    assert ys_home.ys("daemon", "install", env={"YS_HOME": str(odd)}).returncode == 0
    unit = config / "systemd" / "user" / "ys.service"
    assert f'Environment="YS_HOME={tmp_path}/a \\"b\\" 100%%"' in unit.read_text()
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return
    check = subprocess.run(
        [analyze, "verify", unit.name], cwd=unit.parent, capture_output=True, text=True, timeout=60
    )
    if check.returncode != 0 and "manager" in check.stderr.lower():
        pytest.skip(f"systemd-analyze cannot run here: {check.stderr.strip()}")
    assert check.returncode == 0, check.stderr


def test_the_launchd_agent_runs_this_daemon_and_restarts_it_on_failure(tmp_path):
    argv = service.exec_argv()
    plist = plistlib.loads(service.launchd_plist(argv, {"YS_HOME": "/h"}, tmp_path / "d.log"))
    assert plist["Label"] == "ys.daemon" and plist["ProgramArguments"] == [
        sys.executable,
        "-m",
        "ys.daemon",
        "run",
    ]
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["EnvironmentVariables"] == {"YS_HOME": "/h"}
    assert plist["StandardErrorPath"] == str(tmp_path / "d.log")
    assert service.manager("darwin") == "launchd" and service.manager("linux") == "systemd"
