"""Generate the shell completions (completions/) and the man pages (man/) from the command tree.

    .venv/bin/python scripts/gen_docs.py           # write them
    .venv/bin/python scripts/gen_docs.py --check   # exit 1 if the committed files drift

Man pages: `ys/man/ys.1`, and `ys/man/ys-<command>.1` for every command and subcommand
(`ys-daemon-start.1`); they ship inside the package (`ys man install` copies them where `man`
looks), and `man/` at the top of the repository is a link to that folder. Everything comes from the click command that typer builds, so help text
written once in ys/commands/ reaches `--help`, the man pages and the completions alike.
tests/cli/test_docs.py fails when the committed files differ from what this script makes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click

REPO = Path(__file__).resolve().parent.parent

EXIT_STATUS = [
    ("0", "Success."),
    ("1", "The workflow failed or was cancelled (wait, trigger --wait), or an unexpected error."),
    ("2", "Usage or invalid input: INVALID_ARGUMENT, INVALID_EXECUTION_EVENT, "
          "INVALID_START_PARAMETERS."),
    ("3", "Conflict: EXECUTION_ID_CONFLICT, START_REQUEST_MISMATCH, EFFECT_REQUEST_MISMATCH."),
    ("4", "Not found: EXECUTION_NOT_FOUND, WORKFLOW_NOT_FOUND."),
    ("5", "The daemon cannot be reached."),
    ("6", "Timed out (wait, trigger --wait --timeout)."),
    ("7", "Storage exhausted: RESOURCE_EXHAUSTED."),
]

ENVIRONMENT = [
    ("YS_HOME", "Put the database, logs, workflows folder and socket in this one folder."),
    ("YS_DB", "The database file."),
    ("YS_WORKFLOWS", "The workflows folder."),
    ("YS_SOCKET", "The daemon's Unix socket."),
    ("YS_AUTOSTART", "0 stops commands from starting the daemon when none answers."),
    ("NO_COLOR", "Any value turns colour off. Output that is not a terminal has none either."),
]


def esc(text: str) -> str:
    """Text as roff: backslashes and hyphens escaped, no line starting with a control dot."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line
                     for line in text.split("\n"))


def _paragraphs(text: str) -> str:
    return "\n.PP\n".join(esc(p.strip()) for p in text.strip().split("\n\n") if p.strip())


def _first_line(cmd: click.Command) -> str:
    return (cmd.help or "").strip().split("\n\n")[0].strip()


def _walk(cmd: click.Command, path: list[str], parent: click.Context | None
          ) -> list[tuple[list[str], click.Command, click.Context]]:
    ctx = click.Context(cmd, info_name=path[-1], parent=parent, **cmd.context_settings)
    found = [(path, cmd, ctx)]
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                found += _walk(sub, [*path, name], ctx)
    return found


def commands() -> list[tuple[list[str], click.Command, click.Context]]:
    """Every command of `ys`, the root first, each with its path (["ys", "daemon", "start"])."""
    from ys.commands.app import command

    return _walk(command(), ["ys"], None)


def _option_rows(cmd: click.Command, ctx: click.Context) -> tuple[list[str], list[str]]:
    args, opts = [], []
    for p in cmd.get_params(ctx):
        help_text = esc(getattr(p, "help", None) or "")
        if isinstance(p, click.Argument):
            args.append(f".TP\n.B {esc(p.make_metavar(ctx))}\n{help_text}")
            continue
        assert isinstance(p, click.Option)
        names = ", ".join(f"\\fB{esc(n)}\\fR" for n in [*p.opts, *p.secondary_opts])
        if not p.is_flag:
            names += f" \\fI{esc(p.make_metavar(ctx))}\\fR"
        default = p.default
        if p.show_default and default not in (None, False, (), []) and not p.is_flag:
            value = getattr(default, "value", default)
            help_text += f" Default: {esc(str(value))}."
        opts.append(f".TP\n{names}\n{help_text}")
    return args, opts


def man_page(path: list[str], cmd: click.Command, ctx: click.Context,
             all_paths: list[list[str]]) -> str:
    from ys import __version__

    name = "-".join(path)
    lines = [
        f'.TH "{name.upper()}" "1" "" "ys {__version__}" "ys manual"',
        ".SH NAME",
        f"{esc(name)} \\- {esc(_first_line(cmd))}",
        ".SH SYNOPSIS",
        f".B {esc(' '.join(path))}",
        esc(" ".join(cmd.collect_usage_pieces(ctx))),
        ".SH DESCRIPTION",
        _paragraphs(cmd.help or ""),
    ]
    args, opts = _option_rows(cmd, ctx)
    if args:
        lines += [".SH ARGUMENTS", *args]
    if opts:
        lines += [".SH OPTIONS", *opts]
    if isinstance(cmd, click.Group):
        lines.append(".SH COMMANDS")
        for sub_name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, sub_name)
            if sub is None or sub.hidden:
                continue
            lines += [f".TP\n.B {esc(' '.join([*path, sub_name]))}",
                      f"{esc(_first_line(sub))} See \\fB{esc('-'.join([*path, sub_name]))}\\fR(1)."]
    if len(path) == 1:
        lines.append(".SH EXIT STATUS")
        lines += [f".TP\n.B {code}\n{esc(text)}" for code, text in EXIT_STATUS]
        lines.append(".SH ENVIRONMENT")
        lines += [f".TP\n.B {esc(var)}\n{esc(text)}" for var, text in ENVIRONMENT]
    related = ["-".join(p) for p in all_paths if p != path and (
        len(p) == 1 or p[:-1] == path or p[:-1] == path[:-1] or p == path[:-1])]
    if related:
        lines.append(".SH SEE ALSO")
        lines.append(",\n".join(f"\\fB{esc(r)}\\fR(1)" for r in related))
    return "\n".join(lines) + "\n"


def man_pages() -> dict[str, str]:
    """ys/man/<file> -> content for every command."""
    found = commands()
    paths = [p for p, _, _ in found]
    return {f"{'-'.join(p)}.1": man_page(p, cmd, ctx, paths) for p, cmd, ctx in found}


def completion_files() -> dict[str, str]:
    """completions/<file> -> content for bash, zsh and fish."""
    from ys.commands.completions import FILES, script

    return {file: script(shell) for shell, file in FILES.items()}


def generated() -> dict[Path, str]:
    out = {REPO / "ys" / "man" / name: text for name, text in man_pages().items()}
    out.update({REPO / "completions" / name: text for name, text in completion_files().items()})
    return out


def drift() -> list[str]:
    """What differs between the committed files and the generated ones (empty: nothing)."""
    want = generated()
    problems = [f"{p.relative_to(REPO)} is out of date" for p, text in want.items()
                if not p.exists() or p.read_text() != text]
    for folder in ("ys/man", "completions"):
        for p in sorted((REPO / folder).glob("*")):
            if p.is_file() and p not in want:
                problems.append(f"{p.relative_to(REPO)} belongs to no command")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only report drift (exit 1 if any)")
    args = ap.parse_args()
    if args.check:
        problems = drift()
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            print("run: .venv/bin/python scripts/gen_docs.py", file=sys.stderr)
        return 1 if problems else 0
    for path, text in generated().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(REPO)}")
    for problem in drift():
        print(f"remove by hand: {problem}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
