"""Helpers for the end-to-end tests: workflow scripts that leave countable side effects, and
readers for histories, effect files and processes.

Every workflow script written here starts with PRELUDE, which gives it two step functions:
`note(d, line)` appends one line to `<d>/effects` (the test counts lines to prove a step ran
exactly once), and `block(d, name)` notes `<name>:start:<pid>`, waits until the test creates
`<d>/<name>.go`, then notes `<name>:end`. The folder `d` is passed in the params, so each test
has its own.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:  # `tests` is not a package on the path when pytest runs alone
    sys.path.insert(0, str(_REPO))

from tests.conftest import DaemonHandle, _alive, wait_until  # noqa: E402

__all__ = [
    "DaemonHandle", "PRELUDE", "alive", "claimed", "count", "events", "fixture_dir", "go", "kinds",
    "lines", "parse_iso", "wait_until", "write_workflow",
]

PRELUDE = '''\
import os
import pathlib
import sys
import time

import ys


def note(d, line):
    """A side effect the test counts: one line appended per call."""
    with open(os.path.join(d, "effects"), "a") as f:
        f.write(line + "\\n")
    return line


def block(d, name):
    """Note the start, wait for the test to create <name>.go, note the end."""
    note(d, name + ":start:" + str(os.getpid()))
    go = pathlib.Path(d, name + ".go")
    while not go.exists():
        time.sleep(0.01)
    note(d, name + ":end")
    return name


'''


def write_workflow(daemon: DaemonHandle, name: str, body: str) -> Path:
    """Write `<name>.py`: PRELUDE followed by the (dedented) body."""
    return daemon.write(f"{name}.py", PRELUDE + textwrap.dedent(body))


def lines(d: Path) -> list[str]:
    """The side-effect lines the workflow steps wrote so far."""
    try:
        return (d / "effects").read_text().splitlines()
    except FileNotFoundError:
        return []


def count(d: Path, prefix: str) -> int:
    return sum(1 for ln in lines(d) if ln == prefix or ln.startswith(prefix + ":"))


def go(d: Path, name: str) -> None:
    """Release the step blocked in `block(d, name)`."""
    (d / f"{name}.go").touch()


def events(client: Any, execution_id: str) -> list[dict[str, Any]]:
    """The whole history, every page."""
    out: list[dict[str, Any]] = []
    token = None
    while True:
        page = client.history(execution_id, limit=1000, page_token=token)
        out.extend(page["events"])
        token = page["next_page_token"]
        if not token:
            return out


def kinds(client: Any, execution_id: str) -> list[str]:
    return [e["kind"] for e in events(client, execution_id)]


def claimed(client: Any, execution_id: str) -> int:
    """How many deliveries the dispatcher started."""
    return kinds(client, execution_id).count("claimed")


def parse_iso(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


def alive(pid: int) -> bool:
    return _alive(pid)


def fixture_dir(tmp_path: Path) -> Path:
    """A folder for one test's side effects and go-files (readable by its workflows)."""
    d = tmp_path / "fx"
    d.mkdir(exist_ok=True)
    os.chmod(d, 0o700)
    return d
