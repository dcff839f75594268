"""`ys completions SHELL`: the completion script for bash, zsh or fish.

The scripts use click's completion protocol (`_YS_COMPLETE=bash_complete ys ...`), which
`ys.commands.app.run` answers. The same scripts are committed in completions/ by
scripts/gen_docs.py, and a test fails when they drift.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated

import typer

from ys.commands._opts import add

# shell -> the file name it is committed under in completions/
FILES = {"bash": "ys.bash", "zsh": "_ys", "fish": "ys.fish"}


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def script(shell: str) -> str:
    from click.shell_completion import get_completion_class

    from ys.commands.app import COMPLETE_VAR, command

    cls = get_completion_class(shell)
    assert cls is not None, shell
    return cls(command(), {}, "ys", COMPLETE_VAR).source().rstrip("\n") + "\n"


def completions(
    shell: Annotated[
        Shell, typer.Argument(help="The shell: bash, zsh or fish.", show_default=False)
    ],
) -> None:
    """Print the shell completion script for bash, zsh or fish.

    For example: `ys completions bash > ~/.local/share/bash-completion/completions/ys`, or
    `ys completions fish > ~/.config/fish/completions/ys.fish`.
    """
    sys.stdout.write(script(shell.value))


def register(app: typer.Typer) -> None:
    add(app, "completions", completions)
