"""`ys completions SHELL` prints the completion script; `ys completions install [SHELL]` writes
it where that shell looks for a user's completions.

The scripts use click's completion protocol (`_YS_COMPLETE=bash_complete ys ...`), which
`ys.commands.app.run` answers. The same scripts are committed in completions/ by
scripts/gen_docs.py, and a test fails when they drift.
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ys.commands._opts import Json, add
from ys.commands._output import fail

# shell -> the file name it is committed under in completions/
FILES = {"bash": "ys.bash", "zsh": "_ys", "fish": "ys.fish"}


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


completions_app = typer.Typer(
    help="Print or install the shell completion script for bash, zsh or fish.",
    no_args_is_help=True,
    suggest_commands=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def script(shell: str) -> str:
    from click.shell_completion import get_completion_class

    from ys.commands.app import COMPLETE_VAR, command

    cls = get_completion_class(shell)
    assert cls is not None, shell
    return cls(command(), {}, "ys", COMPLETE_VAR).source().rstrip("\n") + "\n"


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def _xdg(var: str, default: str) -> Path:
    value = os.environ.get(var, "")
    return Path(value) if os.path.isabs(value) else _home() / default


def target(shell: str) -> tuple[Path, str | None]:
    """Where `shell` loads a user's completion file for `ys`, and the line to add to the shell's
    start-up file when it does not look there by itself (None: nothing to add)."""
    if shell == "bash":
        # bash-completion loads `ys` from the user folder on the first Tab after `ys`
        user = os.environ.get("BASH_COMPLETION_USER_DIR", "")
        base = Path(user) if user else _xdg("XDG_DATA_HOME", ".local/share") / "bash-completion"
        return base / "completions" / "ys", None
    if shell == "zsh":
        # zsh has no per-user folder of its own: ~/.zfunc is the usual one, put on fpath
        return _home() / ".zfunc" / "_ys", "fpath+=~/.zfunc; autoload -Uz compinit && compinit"
    return _xdg("XDG_CONFIG_HOME", ".config") / "fish" / "completions" / "ys.fish", None


def _default_shell() -> str:
    name = Path(os.environ.get("SHELL", "")).name
    if name in FILES:
        return name
    fail(
        "INVALID_ARGUMENT",
        f"cannot tell the shell from SHELL={os.environ.get('SHELL', '')!r}: "
        "name it: ys completions install bash|zsh|fish",
    )


def _print(shell: Shell) -> None:
    sys.stdout.write(script(shell.value))


def _printer(shell: Shell) -> None:
    def run() -> None:
        _print(shell)

    run.__doc__ = (
        f"Print the completion script for {shell.value}.\n\n"
        f"To install it where {shell.value} looks: `ys completions install {shell.value}`."
    )
    add(completions_app, shell.value, run)


for _shell in Shell:
    _printer(_shell)


def install(
    shell: Annotated[
        Shell | None,
        typer.Argument(
            help="The shell: bash, zsh or fish (default: the one $SHELL names).",
            show_default=False,
        ),
    ] = None,
    json_out: Json = False,
) -> None:
    """Write the completion script where the shell looks for a user's completions.

    bash: `$XDG_DATA_HOME/bash-completion/completions/ys` (loaded by bash-completion);
    zsh: `~/.zfunc/_ys`, and it prints the line to add to ~/.zshrc; fish:
    `$XDG_CONFIG_HOME/fish/completions/ys.fish`. Running it again brings the file up to date.
    """
    name = shell.value if shell else _default_shell()
    path, rc_line = target(name)
    text = script(name)
    before = path.read_text() if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    if before != text:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    state = "unchanged" if before == text else ("updated" if before is not None else "written")
    if json_out:
        import json

        doc = {"shell": name, "path": str(path), "state": state, "add_to_rc": rc_line}
        sys.stdout.write(json.dumps(doc) + "\n")
        return
    verb = {"written": "wrote", "updated": "updated", "unchanged": "already up to date:"}[state]
    sys.stdout.write(f"{verb} {path} ({name} completions for ys)\n")
    if rc_line:
        sys.stdout.write(f"add this line to ~/.zshrc if it is not there yet:\n  {rc_line}\n")
    else:
        sys.stdout.write(f"new {name} sessions complete ys commands\n")


add(completions_app, "install", install)


def register(app: typer.Typer) -> None:
    app.add_typer(completions_app, name="completions")
