"""Docs are tested: every command and option has help, and the committed man pages and shell
completions are exactly what scripts/gen_docs.py makes from the commands."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import click
import pytest

REPO = Path(__file__).resolve().parents[2]


def _gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = module
    spec.loader.exec_module(module)
    return module


gen_docs = _gen_docs()
COMMANDS = gen_docs.commands()


@pytest.mark.parametrize("path,cmd,ctx", COMMANDS, ids=[" ".join(p) for p, _, _ in COMMANDS])
def test_every_command_and_parameter_has_help(path, cmd, ctx):
    assert (cmd.help or "").strip(), f"{' '.join(path)} has no help"
    for param in cmd.get_params(ctx):
        assert (getattr(param, "help", None) or "").strip(), (
            f"{' '.join(path)}: {param.name} has no help"
        )


def _options(command: str) -> dict[str, click.Parameter]:
    path, cmd, ctx = next(c for c in COMMANDS if " ".join(c[0][1:]) == command)
    return {p.opts[0]: p for p in cmd.get_params(ctx) if p.opts}


@pytest.mark.parametrize(
    "command, option, help_starts, metavar",
    [
        ("list", "--workflow", "Only executions of this workflow.", None),
        ("cancel", "--workflow", "Instead of ID: only executions of this workflow", None),
        ("cancel", "--since", "Instead of ID: only executions admitted", "DUR"),
        ("cancel", "--tag", "Instead of ID: only executions with this tag", "KEY=VALUE"),
        ("retry", "--workflow", "With --status: only executions of this workflow", None),
        ("retry", "--since", "With --status: only executions admitted", "DUR"),
        ("export", "--workflow", "Only executions of workflow W.", "W"),
    ],
)
def test_shared_filters_say_how_each_command_uses_them(command, option, help_starts, metavar):
    """One declaration of each filter (ys/commands/_opts.py), but its help keeps the
    command's context: cancel's filters replace the ID, retry's qualify --status."""
    param = _options(command)[option]
    assert (getattr(param, "help", None) or "").startswith(help_starts), param
    if metavar:
        assert param.metavar == metavar, param.metavar


def test_the_design_commands_of_this_issue_exist():
    names = {" ".join(p[1:]) for p, _, _ in COMMANDS}
    assert {
        "daemon run",
        "daemon start",
        "daemon stop",
        "daemon status",
        "trigger",
        "get",
        "ps",
        "list",
        "describe",
        "history",
        "wait",
        "logs",
        "wake",
        "workflows",
        "completions",
    } <= names


def test_committed_man_pages_and_completions_match_the_commands():
    problems = gen_docs.drift()
    assert problems == [], (
        f"{problems}: run .venv/bin/python scripts/gen_docs.py and commit ys/man/ and completions/"
    )


def test_every_command_has_a_man_page_that_names_every_option():
    for path, cmd, ctx in COMMANDS:
        page = (REPO / "ys" / "man" / f"{'-'.join(path)}.1").read_text()
        for param in cmd.get_params(ctx):
            if isinstance(param, click.Option):
                assert param.opts[0].replace("-", "\\-") in page, (path, param.opts)


def test_ys_completions_prints_the_committed_scripts(ys_home):
    for shell, file in (("bash", "ys.bash"), ("zsh", "_ys"), ("fish", "ys.fish")):
        result = ys_home.ys("completions", shell)
        assert result.returncode == 0
        assert result.stdout == (REPO / "completions" / file).read_text()


def _complete(daemon, words: str) -> list[str]:
    result = daemon.ys(
        env={
            "_YS_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split(" ")) - 1),
        }
    )
    assert result.returncode == 0, result.stderr
    return [line.split(",", 1)[1] for line in result.stdout.splitlines()]


def test_completion_offers_commands_options_and_workflow_names(shared):
    assert _complete(shared, "ys tri") == ["trigger"]
    assert set(_complete(shared, "ys daemon st")) == {"start", "stop", "status"}
    assert "--if-exists" in _complete(shared, "ys trigger hello --if")
    assert _complete(shared, "ys trigger hel") == ["hello"]
