"""`ys completions install` and `ys man install` put their files where each shell and man(1)
look, and `ys help CMD` shows a command's page: run as a user would, in a throw-away HOME."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
YS = [sys.executable, "-m", "ys"]


def run(args: list[str], env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*YS, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


@pytest.fixture
def user(tmp_path: Path) -> dict[str, str]:
    """The environment of a user whose HOME is empty (no XDG variables set)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("XDG_", "BASH_COMPLETION", "MANPATH", "YS_"))
    }
    env.update(HOME=str(tmp_path / "home"), SHELL="/bin/bash", YS_AUTOSTART="0")
    (tmp_path / "home").mkdir()
    return env


@pytest.mark.parametrize(
    "shell,where",
    [
        ("bash", ".local/share/bash-completion/completions/ys"),
        ("zsh", ".zfunc/_ys"),
        ("fish", ".config/fish/completions/ys.fish"),
    ],
)
def test_completions_install_writes_the_script_where_the_shell_looks(user, shell, where):
    done = run(["completions", "install", shell, "--json"], user)
    doc = json.loads(done.stdout)
    path = Path(user["HOME"]) / where
    assert doc["path"] == str(path) and doc["state"] == "written"
    assert path.read_text() == run(["completions", shell], user).stdout
    assert (doc["add_to_rc"] is not None) == (shell == "zsh")
    again = json.loads(run(["completions", "install", shell, "--json"], user).stdout)
    assert again["state"] == "unchanged"


def test_completions_install_follows_xdg_and_shell(user, tmp_path):
    user.update(XDG_DATA_HOME=str(tmp_path / "data"), SHELL="/usr/bin/bash")
    done = run(["completions", "install"], user)
    path = tmp_path / "data" / "bash-completion" / "completions" / "ys"
    assert f"wrote {path}" in done.stdout
    # bash loads it: sourcing the file registers a completion function for `ys`
    shown = subprocess.run(
        ["bash", "-c", f"source {path} && complete -p ys"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "ys" in shown.stdout and "-F" in shown.stdout


def test_completions_install_without_a_known_shell_is_a_usage_error(user):
    user["SHELL"] = "/bin/tcsh"
    done = run(["completions", "install"], user, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith("INVALID_ARGUMENT:") and "bash|zsh|fish" in done.stderr
    assert not (Path(user["HOME"]) / ".local").exists()


def test_man_install_copies_every_page_and_man_finds_them(user, tmp_path):
    done = json.loads(run(["man", "install", "--json"], user).stdout)
    folder = Path(user["HOME"]) / ".local/share/man/man1"
    assert done["path"] == str(folder)
    shipped = sorted(p.name for p in (REPO / "ys" / "man").glob("*.1"))
    assert sorted(p.name for p in folder.glob("*.1")) == shipped
    assert done["pages"] == len(shipped) == done["written"]
    assert json.loads(run(["man", "install", "--json"], user).stdout)["written"] == 0
    if done["manpath_hint"] is not None:
        assert str(folder.parent) in done["manpath_hint"]
    if shutil.which("man"):
        shown = subprocess.run(
            ["man", "ys-trigger"],
            env={**user, "MANPATH": str(folder.parent), "MANPAGER": "cat", "MANWIDTH": "100"},
            capture_output=True,
            text=True,
            check=True,
        )
        assert "ys trigger" in shown.stdout and "--if-exists" in shown.stdout


def test_man_install_into_a_chosen_folder(user, tmp_path):
    done = run(["man", "install", "--dir", str(tmp_path / "m")], user)
    assert (tmp_path / "m" / "man1" / "ys-schedule-add.1").is_file()
    assert "man pages in" in done.stdout


@pytest.mark.parametrize("with_man", [True, False])
def test_help_shows_a_commands_page_through_the_pager(user, tmp_path, with_man):
    env = {**user, "MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "100"}
    if not with_man:  # a box without man(1): the page's text through $PAGER
        bare = tmp_path / "bin"
        bare.mkdir()
        env["PATH"] = str(bare)
    elif not shutil.which("man"):
        pytest.skip("man(1) is not installed here")
    done = run(["help", "schedule", "add"], env)
    assert "schedule add" in done.stdout and "--cron" in done.stdout


def test_help_of_an_unknown_command_is_a_usage_error(user):
    done = run(["help", "frobnicate"], user, check=False)
    assert done.returncode == 2 and "no command `ys frobnicate`" in done.stderr


def _source_copy(dest: Path) -> Path:
    """The project's files as a clone has them (no virtualenv, caches or build output)."""
    shutil.copytree(
        REPO,
        dest,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "__pycache__", "*.egg-info", "build", "dist", ".*_cache", ".hypothesis"
        ),
    )
    return dest


def test_pipx_install_gives_a_working_ys_with_its_daemon_and_man_pages(tmp_path, user):
    """`pipx install .` from a clone: ys on PATH runs the main job (a workflow triggered and
    completed by the daemon it starts), and the wheel carries the man pages."""
    from cli_support import daemons_for, stop_pids

    src = _source_copy(tmp_path / "src")
    env = {
        **user,
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "pipx-man"),
    }
    env.pop("VIRTUAL_ENV", None)
    subprocess.run(
        [sys.executable, "-m", "pipx", "install", str(src)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    ys = tmp_path / "bin" / "ys"
    assert ys.exists()
    home = tmp_path / "ys-home"
    job = {
        **env,
        "YS_HOME": str(home),
        "YS_WORKFLOWS": str(src / "examples" / "workflows"),
        "YS_AUTOSTART": "1",
    }
    try:
        done = subprocess.run(
            [str(ys), "trigger", "hello", "--id", "hello-1", "-p", "name=world", "--wait"],
            env=job,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        got = subprocess.run(
            [str(ys), "get", "hello-1", "--json"],
            env=job,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(got.stdout)["status"] == "completed"
        subprocess.run([str(ys), "daemon", "stop"], env=job, capture_output=True, check=True)
    finally:
        stop_pids(daemons_for(home))
    pages = subprocess.run(
        [str(ys), "man", "install", "--json"], env=job, capture_output=True, text=True, check=True
    )
    assert json.loads(pages.stdout)["pages"] >= 40


def test_extras_pull_only_what_they_need():
    """The base install needs no PostgreSQL driver; the `postgres` extra adds only psycopg."""
    from importlib.metadata import requires

    reqs = requires("ys") or []
    base = [r for r in reqs if "extra ==" not in r]
    assert not [r for r in base if r.lower().startswith(("psycopg", "opentelemetry", "pytest"))]
    postgres = [r.split(";")[0].strip() for r in reqs if 'extra == "postgres"' in r]
    assert postgres and all(r.lower().startswith("psycopg") for r in postgres)
