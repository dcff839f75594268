"""`ys step run|sleep|start|wait|params`: durable steps for shell workflows.

The work is in `ys.commands._step` (standard library and the SDK); `ys.cli` runs the common
shapes there without loading typer, and this module gives them help, man pages and completions.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ys.commands import _step
from ys.commands._opts import Json, add, complete_workflows, reflow

ENVIRONMENT = """
Durable steps for shell workflows: run a command once, sleep, start a child, wait for a value.
They work only inside a script the daemon runs.

A shell workflow is an executable script in the workflows folder. Its options go in `# ys:`
lines near the top, in shell quoting, for example `# ys: schedule="0 3 * * *" tz=Europe/Paris
params='{"dir": "/srv"}'` and `# ys: timeout=2h max_attempts=3`: every such line is read; an
option given on two lines is the script's load error (`ys workflows`). `params` (a JSON object)
is what its schedule fires with; a schedule without `tz` is in this machine's zone, stored and
shown by its IANA name.

What every workflow (shell or Python) runs in: the daemon's environment as it was when the
daemon started (a variable exported in your shell later is seen after `ys daemon stop` and the
next start), plus YS_EXECUTION_ID, YS_DELIVERY_TOKEN, YS_SOCKET, YS_WORKFLOW_FILE and
YS_ATTEMPT (1 for the first delivery); a shell script also finds this `ys` first on PATH. Its
standard input is /dev/null, its output goes to the delivery's log (`ys logs ID`; a shell
script's last line on stdout is its result), its working directory is the workflows folder and
its umask is 022, as under cron (new files are -rw-r--r--; the option `# ys: umask=077` makes
them private), whatever the daemon's own (0077: its database, socket and logs stay private).
It runs in a process group of its own, killed whole at a timeout or `ys cancel --now`.
"""

step_app = typer.Typer(
    help=reflow(ENVIRONMENT),
    no_args_is_help=True,
    suggest_commands=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

Key = Annotated[
    str,
    typer.Argument(
        metavar="KEY",
        help="The step's key: unique within the script, the same on every run.",
        show_default=False,
    ),
]


def run(
    key: Key,
    command: Annotated[
        list[str],
        typer.Argument(
            metavar="CMD...", help="The command and its arguments (after --).", show_default=False
        ),
    ],
    json_: Json = False,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="DUR",
            help="Kill an attempt that runs longer (90, 90s, 10m): it fails with StepTimeout "
            "(exit 124).",
            show_default=False,
        ),
    ] = None,
    retry: Annotated[
        str | None,
        typer.Option(
            "--retry",
            metavar="N",
            help="Retry a failed attempt up to N times, durably (the script ends meanwhile).",
            show_default=False,
        ),
    ] = None,
    retry_interval: Annotated[
        str | None,
        typer.Option(
            "--retry-interval",
            metavar="DUR",
            help="Wait this long before each retry (default 1s).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run a command once and record its output and exit status.

    Prints the command's stdout (byte for byte, as it comes) and exits with its status. When
    the script runs again (after a sleep, a crash or a restart), prints the recorded stdout and
    exits with the recorded status without running the command. Its stderr goes to the log as
    it comes.

    Exit statuses: the command's own; 124 when an attempt ran past --timeout (the daemon kills
    it with the whole script and records it failed with StepTimeout); 126 when the command
    cannot be run, 127 when it is not found (as in a shell); 2 for a usage error, before
    anything runs or is recorded. A command that exits non-zero is a failed step: with set -e
    the script ends failed, a replay exits with the same status and output, and `ys retry`
    runs the step again. With --retry N a failed attempt is recorded, the script ends and runs
    again after --retry-interval, up to N more attempts; only the last failure reaches the
    script.

    A step records at most 1 MiB of output: past it the script still gets all of it, but the
    record keeps its first and last 512 KiB with its length and sha256, a replay prints only
    those, and both runs say so on stderr (with the command's own status). Write large output
    to a file inside the command.

    Options go before KEY, except --timeout, --retry and --retry-interval, which may also come
    right after it (ys step run KEY --retry 3 -- CMD); any other option after KEY is a usage
    error. The command comes after --. With --json prints {"stdout": ..., "status": N}
    instead of the output ("stdout_base64" instead of "stdout" for output that is not UTF-8
    text; "stdout_bytes" and "stdout_sha256" when the record keeps only part of it).
    """
    raise typer.Exit(_step.run(key, command, json_, timeout, retry, retry_interval))


def sleep(
    key: Key,
    duration: Annotated[
        str,
        typer.Argument(
            metavar="DURATION", help="How long: 90, 90s, 10m, 2h, 1d.", show_default=False
        ),
    ],
    json_: Json = False,
) -> None:
    """Sleep durably: record the wake and end the script; it runs again from the top when due.

    On that run the step is done and the script goes on past it (with --json it prints
    {"key": ..., "slept": true}).
    """
    raise typer.Exit(_step.sleep(key, duration, json_))


def start(
    key: Key,
    workflow: Annotated[
        str,
        typer.Argument(
            metavar="WORKFLOW",
            help="The child's workflow.",
            autocompletion=complete_workflows,
            show_default=False,
        ),
    ],
    param: Annotated[
        list[str] | None,
        typer.Option(
            "-p",
            "--param",
            metavar="KEY=VALUE",
            help="A param of the child (repeatable); the value is JSON when it parses, else text.",
            show_default=False,
        ),
    ] = None,
    params: Annotated[
        str | None,
        typer.Option(
            "--params",
            metavar="JSON|@FILE|-",
            help="All the child's params as a JSON object.",
            show_default=False,
        ),
    ] = None,
    detached: Annotated[
        bool, typer.Option("--detached", help="The child is not cancelled with this execution.")
    ] = False,
    json_: Json = False,
) -> None:
    """Start a child workflow once, however often the script runs, and print its ID.

    Running again with another workflow or other params under the same key exits 3
    (START_REQUEST_MISMATCH). With --json prints {"execution_id": ...}.
    """
    raise typer.Exit(_step.start(key, workflow, param, params, detached, json_))


def wait(
    key: Key,
    store_key: Annotated[
        str,
        typer.Argument(
            metavar="STORE_KEY",
            help="The durable value to wait for (`ys store put`).",
            show_default=False,
        ),
    ],
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="DURATION",
            help="Give up after this long (90, 10m, 2h, 1d): exit 6 with WAIT_TIMEOUT.",
            show_default=False,
        ),
    ] = None,
    json_: Json = False,
) -> None:
    """Wait until a store key has a value and print it (text as it is, anything else as JSON).

    The script ends while it waits and runs again from the top once the value is put; on
    every later run the step prints the same value. With --json the value is always JSON.
    """
    raise typer.Exit(_step.wait(key, store_key, timeout, json_))


def params(
    key: Annotated[
        str | None,
        typer.Argument(
            metavar="[NAME]",
            help="Print only this param (text as it is, anything else as JSON).",
            show_default=False,
        ),
    ] = None,
    default: Annotated[
        str | None,
        typer.Option(
            "--default",
            metavar="VALUE",
            help="Print VALUE when the execution has no param NAME (read as -p reads a "
            "value: JSON when it parses, else text). Without it a missing param exits 4.",
            show_default=False,
        ),
    ] = None,
    json_: Json = False,
) -> None:
    """Print the execution's params as JSON, or one of them."""
    raise typer.Exit(_step.params(key, json_, default))


# `ys step run KEY -- ls -la`: everything after KEY goes to _step.run, which takes the few
# options allowed there and refuses any other before the command (after --).
step_app.command(
    "run",
    help=reflow(run.__doc__),
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
)(run)
add(step_app, "sleep", sleep)
add(step_app, "start", start)
add(step_app, "wait", wait)
add(step_app, "params", params)


def register(app: typer.Typer) -> None:
    app.add_typer(step_app, name="step")
