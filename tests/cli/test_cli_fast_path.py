"""The start-up fast paths of `ys.cli.main` (`--version`, `get ID --json`, `trigger`) print the
same bytes and exit with the same code as the typer app, and `--json` paths import no rich,
asyncio or aiohttp."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from cli_support import wait_status

HEAVY = {"typer", "click", "rich", "asyncio", "aiohttp", "pydantic"}

# Runs ys.cli.main with argv[2:], then writes which heavy packages it imported to argv[1].
PROBE = f"""
import atexit, json, sys
out = sys.argv[1]
def dump():
    with open(out, "w") as f:
        json.dump(sorted({{m.split(".")[0] for m in sys.modules}} & set({sorted(HEAVY)!r})), f)
atexit.register(dump)
sys.argv = ["ys", *sys.argv[2:]]
from ys.cli import main
main()
"""


def both_paths(daemon, *args: str) -> tuple[tuple, tuple]:
    fast = daemon.ys(*args)
    slow = daemon.ys(*args, env={"YS_NO_FAST_PATH": "1"})
    return (
        (fast.returncode, fast.stdout, fast.stderr),
        (slow.returncode, slow.stdout, slow.stderr),
    )


def relative_times_cut(result: tuple) -> tuple:
    return tuple(
        re.sub(r"\((just now|[^()]* ago|in [^()]*)\)", "(...)", x) if isinstance(x, str) else x
        for x in result
    )


def imported(daemon, tmp_path, *args: str, slow: bool = False) -> set[str]:
    out = tmp_path / "modules.json"
    env = dict(daemon.env, **({"YS_NO_FAST_PATH": "1"} if slow else {}))
    subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args], env=env, capture_output=True, timeout=60
    )
    return set(json.loads(out.read_text()))


@pytest.fixture(scope="module")
def done(shared) -> str:
    assert shared.ys("trigger", "hello", "--id", "fp/done é").returncode == 0
    wait_status(shared, "fp/done é", "completed")
    return "fp/done é"


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["get", "ID", "--json"],
        ["get", "--json", "ID"],
        ["get", "fp-nobody", "--json"],
        ["get", "ID"],
        ["get", "fp-nobody"],
        ["trigger", "hello", "--id", "ID", "--if-exists", "use-existing", "--json"],
        ["trigger", "hello", "--if-exists", "use-existing", "--id", "ID"],
        ["trigger", "helo", "--id", "fp-typo"],
        ["trigger", "hello", "--id", "fp-bad", "-p", "a=1", "--param", "a=2"],
        ["trigger", "hello", "--id", "fp-bad", "--params", "{nope"],
    ],
)
def test_fast_path_output_equals_the_typer_path(shared, done, args):
    args = [done if a == "ID" else a for a in args]
    fast, slow = both_paths(shared, *args)
    # for people, times are shown relative to now ("(1.1s ago)"): the two runs differ there
    assert relative_times_cut(fast) == relative_times_cut(slow)
    assert fast[0] in (0, 2, 4)


def test_fast_path_without_a_daemon_equals_the_typer_path(ys_home):
    fast, slow = both_paths(ys_home, "get", "x", "--json")
    assert fast == slow and fast[0] == 5


def test_fast_paths_import_neither_typer_nor_rich(shared, done, tmp_path):
    assert imported(shared, tmp_path, "--version") == set()
    assert imported(shared, tmp_path, "get", done, "--json") == set()
    assert imported(shared, tmp_path, "trigger", "hello", "-p", "a=1", "--json") == set()


@pytest.mark.parametrize(
    "argv,fast",
    [
        (["trigger", "hello"], True),
        (
            [
                "trigger",
                "hello",
                "--id",
                "x",
                "-p",
                "a=1",
                "--param",
                "b=2",
                "--params",
                "{}",
                "--if-exists",
                "use-existing",
                "--json",
            ],
            True,
        ),
        (["trigger", "hello", "--wait"], False),
        (["trigger", "hello", "--id", "a", "--id", "b"], False),
        (["trigger", "hello", "--json", "--json"], False),
        (["trigger", "hello", "--id", "-x"], False),
        (["trigger", "hello", "-p"], False),
        (["trigger", "hello", "--if-exists", "maybe"], False),
        (["trigger", "hello", "--id=x"], False),
        (["trigger", "--id", "x", "hello"], False),
        (["trigger", "hello", "extra"], False),
        (["trigger", "--help"], False),
    ],
)
def test_only_plain_trigger_command_lines_take_the_fast_path(argv, fast):
    from ys.commands._admit import fast_argv

    assert (fast_argv(argv) is not None) is fast


@pytest.mark.parametrize(
    "args",
    [
        ["get", "ID", "--json"],
        ["list", "--json"],
        ["describe", "ID", "--json"],
        ["trigger", "hello", "--json"],
    ],
)
def test_json_paths_import_no_rich_asyncio_or_aiohttp(shared, done, tmp_path, args):
    args = [done if a == "ID" else a for a in args]
    heavy = imported(shared, tmp_path, *args, slow=True)
    assert heavy <= {"typer", "click"}, heavy
