"""The `ys` command line: `main()` is the entry point of the console script and `python -m ys`.

Start-up is most of what `ys get ID --json`, `ys trigger`, `ys step` and `ys --version` cost:
`import typer` alone takes several times as long as the interpreter's own start. So `main()`
first looks at argv for those shapes and answers them without typer (`ys.commands._output`,
`ys.commands._admit`, `ys.commands._step` and `ys.client`; `ys get ID` for people renders with
`ys.commands._render`, rich's console, table and panel only);
everything else, `--help`, `--wait` and any unknown or repeated flag included, goes to the
typer app in `ys.commands.app`. Both paths run the same functions, print the same bytes and
exit with the same code (tested; `YS_NO_FAST_PATH=1` turns the fast path off).
"""

from __future__ import annotations

import os
import sys


def _fast_path(argv: list[str]) -> int | None:
    """An exit code if argv is one of the fast shapes, else None (the typer app decides)."""
    if argv == ["--version"]:
        from ys import __version__

        sys.stdout.write(f"ys {__version__}\n")
        return 0
    if len(argv) == 3 and argv[0] == "get" and "--json" in argv[1:]:
        execution_id = argv[2] if argv[1] == "--json" else argv[1]
        if not execution_id or execution_id.startswith("-"):
            return None  # empty, an option, or `--`: the typer app says what it means
        from ys.commands._output import guarded

        return guarded(lambda: _get_json(execution_id))
    if len(argv) == 2 and argv[0] == "get":
        # For people: rich renders it, but typer (most of the typer path's cost) is not needed.
        execution_id = argv[1]
        if not execution_id or execution_id.startswith("-"):
            return None
        from ys.commands._output import guarded

        return guarded(lambda: _get_shown(execution_id))
    if argv[:1] == ["trigger"]:
        from ys.commands._admit import fast_argv, trigger

        kwargs = fast_argv(argv)
        if kwargs is not None:
            from ys.commands._output import guarded

            return guarded(lambda: trigger(**kwargs))
    if argv[:1] == ["step"]:  # shell workflows call it once per step: keep it cheap
        from ys.commands._step import fast

        step = fast(argv)
        if step is not None:
            from ys.commands._output import guarded

            return guarded(step)
    return None


def _get_json(execution_id: str) -> int:
    from ys.commands._output import client, emit_json

    with client() as c:
        emit_json(c.get(execution_id))
    return 0


def _get_shown(execution_id: str) -> int:
    from ys.commands import _render
    from ys.commands._output import client

    with client() as c:
        record = c.get(execution_id)
    _render.show_record(record)
    return 0


def main() -> None:
    argv = sys.argv[1:]
    code = None
    if not os.environ.get("YS_NO_FAST_PATH") and "_YS_COMPLETE" not in os.environ:
        code = _fast_path(argv)
    if code is None:
        from ys.commands.app import run

        code = run(argv)
    sys.exit(code)
