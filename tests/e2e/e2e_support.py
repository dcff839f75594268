"""Helpers for the end-to-end tests: workflow scripts that leave countable side effects, and
readers for histories, effect files and processes (most of them shared, from tests/support.py).

Every workflow script written here starts with PRELUDE, which gives it two step functions:
`note(d, line)` appends one line to `<d>/effects` (the test counts lines to prove a step ran
exactly once), and `block(d, name)` notes `<name>:start:<pid>`, waits until the test creates
`<d>/<name>.go`, then notes `<name>:end`. The folder `d` is passed in the params, so each test
has its own.
"""

from __future__ import annotations

from pathlib import Path

from tests.support import (
    DaemonHandle,
    alive,
    claimed,
    events,
    fixture_dir,
    kinds,
    lines,
    make_home,
    parse_iso,
    prelude,
    wait_until,
    write_script,
)

__all__ = [
    "DaemonHandle",
    "PRELUDE",
    "alive",
    "claimed",
    "count",
    "events",
    "fixture_dir",
    "go",
    "kinds",
    "lines",
    "make_home",
    "parse_iso",
    "wait_until",
    "write_workflow",
]

PRELUDE = prelude(start_pid=True)  # block() notes <name>:start:<pid>


def write_workflow(daemon: DaemonHandle, name: str, body: str) -> Path:
    """Write `<name>.py`: PRELUDE followed by the (dedented) body."""
    return write_script(daemon, name, body, PRELUDE)


def count(d: Path, prefix: str) -> int:
    return sum(1 for ln in lines(d) if ln == prefix or ln.startswith(prefix + ":"))


def go(d: Path, name: str) -> None:
    """Release the step blocked in `block(d, name)`."""
    (d / f"{name}.go").touch()
