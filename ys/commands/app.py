"""The typer app: every command group registers itself here, one line per module.

`run(argv)` is the slow path of `ys.cli.main`: it answers shell completion requests, runs the
command, and turns every way a command ends (usage errors included) into one stderr line and
an exit code through `ys.commands._output`.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click
import typer

from ys.commands._opts import reflow
from ys.commands._output import error, guarded
from ys.errors import YsError

# One module per command group; each has `register(app)`. Adding a group is one line here.
MODULES = [
    "daemon",
    "trigger",
    "executions",
    "retry",
    "history",
    "logs",
    "workflows",
    "metrics",
    "completions",
    "manpages",
    "effects",
    "store",
    "schedule",
    "cron",
    "step",
    "gc",
    "keep",
    "transfer",
    "doctor",
    "service",
    "ui",
    "top",
]

COMPLETE_VAR = "_YS_COMPLETE"
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2


def _keep_argument_help() -> None:
    """typer 0.25 sets an argument's `help` and then calls click.Argument.__init__, which
    since click 8.5 takes `help` itself and resets it to None; set it again afterwards."""
    init = typer.core.TyperArgument.__init__

    def __init__(self: click.Argument, *, help: str | None = None, **kw: Any) -> None:
        init(self, help=help, **kw)  # type: ignore[arg-type]
        self.help = help

    setattr(typer.core.TyperArgument, "__init__", __init__)  # noqa: B010


_keep_argument_help()

app = typer.Typer(
    name="ys",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    suggest_commands=False,  # click suggests already; typer would say it twice
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from ys import __version__

        sys.stdout.write(f"ys {__version__}\n")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_version,
        help="Print the version of ys and exit.",
    ),
) -> None:
    """Durable workflows for scripts: a local daemon, one SQLite file, steps that survive
    crashes.

    Drop a workflow script into the workflows folder, then `ys trigger NAME`. Every command
    takes --json for one JSON document on stdout; errors are one line on stderr, CODE: what
    happened; what to do. Exit codes: 0 ok, 1 workflow failed or cancelled, 2 usage or invalid
    input, 3 conflict, 4 not found, 5 daemon or database unreachable, 6 timed out, 7 storage
    exhausted.
    """


app.callback(help=reflow(_root.__doc__))(_root)

for _name in MODULES:
    importlib.import_module(f"ys.commands.{_name}").register(app)


def command() -> click.Command:
    """The click command tree (man pages and completions are generated from it)."""
    return typer.main.get_command(app)


def _usage(exc: click.UsageError) -> YsError:
    where = exc.ctx.command_path if exc.ctx else "ys"
    if isinstance(exc, click.NoSuchOption) and exc.possibilities:
        # one wording whether click found one close option or several (best match first)
        names = [f"'{p}'" for p in exc.possibilities]
        alternatives = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        return error(
            "INVALID_ARGUMENT",
            f"no such option '{exc.option_name}'; did you mean {alternatives}?",
        )
    message = exc.format_message().strip().rstrip(".").replace(". Did you mean", "; did you mean")
    if message[:1].isupper() and message[1:2].islower():
        message = message[0].lower() + message[1:]
    return error("INVALID_ARGUMENT", message, hint=f"see `{where} --help`")


def _invoke(cmd: click.Command, argv: list[str]) -> int:
    try:
        rv = cmd.main(args=argv, prog_name="ys", standalone_mode=False)
    except _NO_ARGS_IS_HELP as exc:
        # typer's rich help has already printed itself; click's plain help is the message.
        if exc.format_message():
            sys.stdout.write(exc.format_message() + "\n")
        return 2
    except click.UsageError as exc:
        raise _usage(exc) from None
    except click.Abort:
        sys.stderr.write("aborted\n")
        return 130
    except click.ClickException as exc:
        raise error("INVALID_ARGUMENT", exc.format_message()) from None
    return rv if isinstance(rv, int) else 0


def run(argv: list[str]) -> int:
    cmd = command()
    instruction = os.environ.get(COMPLETE_VAR)
    if instruction:
        # click's own completion protocol (`bash_source`, `bash_complete`, ...): completion
        # callbacks never start the daemon (they use a client without autostart).
        from click.shell_completion import shell_complete

        return shell_complete(cmd, {}, "ys", COMPLETE_VAR, instruction)
    return guarded(lambda: _invoke(cmd, argv))
