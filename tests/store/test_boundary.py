"""The store's boundary: outside ys/store/, nothing knows SQL or SQLite. A module of ys outside
the store may import only the factory (`ys.store`) and the protocols (`ys.store.protocols`),
never `sqlite3`, `sqlite_utils` or the store's private modules, and holds no SQL of its own;
so a second adapter needs nothing outside ys/store/ to change.

And neither the daemon nor the store reads the environment: every setting is read once, in
ys.settings, and passed to the part that uses it. And the dashboard (ys/ui/) is built over the
daemon's parts, never the daemon over it: ys/daemon/ imports ys.ui only where it mounts it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import ys

PACKAGE = Path(ys.__file__).resolve().parent  # the ys under test (a checkout's, or another)
PUBLIC = {"ys.store", "ys.store.protocols"}
FORBIDDEN_ROOTS = {"sqlite3", "sqlite_utils"}
# A statement of SQL in a string: a keyword and what it works on (not "DELETE" alone, an HTTP
# method).
SQL = re.compile(
    r"\b(SELECT\b.+\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(TABLE|INDEX|TRIGGER)|PRAGMA\s+\w+)\b"
)


def _outside_modules() -> list[Path]:
    store = PACKAGE / "store"
    return sorted(p for p in PACKAGE.rglob("*.py") if store not in p.parents)


def _imports(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """Every module an import statement names (also inside functions), with its line; a
    relative import is resolved against `module`."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.rsplit(".", node.level)[0]
                base = f"{parent}.{base}" if base else parent
            out.append((node.lineno, base))
            # `from ys.store import sqlite` names the module ys.store.sqlite
            out += [
                (node.lineno, f"{base}.{alias.name}") for alias in node.names if base == "ys.store"
            ]
    return out


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _refused(name: str) -> bool:
    if name.split(".")[0] in FORBIDDEN_ROOTS:
        return True
    if name == "ys.store" or name.startswith("ys.store."):
        return name not in PUBLIC and not _is_public_name(name)
    return False


def _is_public_name(name: str) -> bool:
    """`ys.store.open_store` or `ys.store.Store` (a name of the package, not a module)."""
    head, _, tail = name.rpartition(".")
    return (
        head == "ys.store"
        and not (PACKAGE / "store" / tail).exists()
        and not (PACKAGE / "store" / f"{tail}.py").exists()
    )


def test_no_module_outside_the_store_imports_sqlite_or_the_stores_private_modules():
    found = []
    for path in _outside_modules():
        module = _module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        found += [
            f"{path.relative_to(PACKAGE.parent)}:{line}: imports {name}"
            for line, name in _imports(tree, module)
            if _refused(name)
        ]
    assert found == [], "\n".join(found)


def test_no_module_outside_the_store_holds_sql():
    found = []
    for path in _outside_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if SQL.search(node.value):
                    where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                    found.append(f"{where}: {node.value[:60]!r}")
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(
    "source, refused",
    [
        ("import sqlite3", True),
        ("from sqlite3 import connect", True),
        ("import sqlite_utils", True),
        ("from ys.store.sqlite import SqliteStore", True),
        ("from ys.store.sqlite.reads import verify", True),
        ("from ys.store import sqlite", True),
        ("from ys.store.base import Delivery", True),
        ("from ys.store.records import Record", True),
        ("from ys.store import open_store", False),
        ("from ys.store.protocols import Store", False),
        ("import ys.store.protocols", False),
        ("def f():\n    from ys.store.sqlite.schedules import check\n", True),
    ],
)
def test_the_guard_tells_allowed_imports_from_refused_ones(source: str, refused: bool):
    names = [name for _, name in _imports(ast.parse(source), "ys.daemon.example")]
    assert any(_refused(n) for n in names) is refused, names


@pytest.mark.parametrize(
    "text, sql",
    [
        ("SELECT execution_id FROM executions WHERE workflow=?", True),
        ("UPDATE executions SET status='failed'", True),
        ("PRAGMA query_only=ON", True),
        ("DELETE", False),
        ("select a workflow from the list", False),
    ],
)
def test_the_sql_guard_tells_statements_from_prose(text: str, sql: bool):
    assert bool(SQL.search(text)) is sql


# -- no environment read under ys/daemon/ or ys/store/ ---------------------------------------

ENVIRON_NAMES = {"environ", "environb", "getenv", "getenvb"}
# The one use allowed: the spawn launcher copies the daemon's environment for its child (a copy
# handed on, not a setting read).
ENVIRON_ALLOWED = {("ys/daemon/launcher.py", "env = {**os.environ, **_run_env(workflow, env)}")}


def _environ_uses(tree: ast.AST) -> list[int]:
    """The lines that touch the environment: `os.environ`, `os.getenv(...)`, and those names
    imported from os (comments and docstrings do not count)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ENVIRON_NAMES:
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            lines += [node.lineno for a in node.names if a.name in ENVIRON_NAMES]
    return sorted(set(lines))


def test_no_module_of_the_daemon_or_the_store_reads_the_environment():
    found = []
    for folder in ("daemon", "store"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            text = path.read_text()
            name = str(path.relative_to(PACKAGE.parent))
            lines = text.splitlines()
            found += [
                f"{name}:{n}: {lines[n - 1].strip()}"
                for n in _environ_uses(ast.parse(text, str(path)))
                if (name, lines[n - 1].strip()) not in ENVIRON_ALLOWED
            ]
    assert found == [], "read it in ys/settings.py and pass it in:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source, uses",
    [
        ("import os\nx = os.environ.get('YS_X')", True),
        ("import os\nx = os.getenv('YS_X')", True),
        ("from os import environ", True),
        ("from os import getenv as g", True),
        ("import os\nenv = dict(os.environ)", True),
        ('"""reads nothing from os.environ"""', False),
        ("env = {'YS_EXECUTION_ID': '1'}  # set for the worker", False),
    ],
)
def test_the_environment_guard_tells_reads_from_mentions(source: str, uses: bool):
    assert bool(_environ_uses(ast.parse(source))) is uses


# -- the dashboard depends on the daemon, never the daemon on the dashboard ---------------------

# The one import of ys.ui under ys/daemon/: the daemon mounts the dashboard on its app.
UI_MOUNT = {("ys/daemon/main.py", "ys.ui.server")}


def _ui_imports(source: str, module: str) -> list[str]:
    names = [name for _, name in _imports(ast.parse(source), module)]
    return [n for n in names if n == "ys.ui" or n.startswith("ys.ui.")]


def test_nothing_under_the_daemon_imports_the_dashboard_but_its_mount():
    found = []
    for path in sorted((PACKAGE / "daemon").rglob("*.py")):
        name = str(path.relative_to(PACKAGE.parent))
        found += [
            f"{name}: imports {module}"
            for module in _ui_imports(path.read_text(), _module_name(path))
            if (name, module) not in UI_MOUNT
        ]
    assert found == [], "the daemon reaches ys.ui only where it mounts it:\n" + "\n".join(found)


def test_the_daemon_mounts_the_dashboard():
    """The allowed import is the mount itself (the check above passes with none at all)."""
    main = PACKAGE / "daemon" / "main.py"
    assert "ys.ui.server" in _ui_imports(main.read_text(), "ys.daemon.main")


@pytest.mark.parametrize(
    "source, found",
    [
        ("def f():\n    from ys.ui.auth import Gate\n", ["ys.ui.auth"]),
        ("import ys.ui.server", ["ys.ui.server"]),
        ("from ys.ui import pages", ["ys.ui"]),
        ("from . import ui_helpers", []),
        ("from ys.daemon import views", []),
    ],
)
def test_the_dashboard_guard_sees_every_import_of_ys_ui(source: str, found: list[str]):
    assert _ui_imports(source, "ys.daemon.example") == found
