"""`ys` ships `py.typed` (PEP 561): a user's mypy checks their workflow against ys's types, as
it would against any installed typed package (ys found on the path, not as the user's own
source)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import ys

GOOD = """
import ys

@ys.workflow
def main(step: ys.Step, params: dict) -> int:
    step.sleep("nap", 10)
    n: int = step.run("count", int, "5", retry=ys.Retry(max_attempts=3), timeout="1m")
    return n

def ask(c: ys.Client) -> str:
    try:
        return str(c.get("x")["status"])
    except ys.NotFoundError as exc:
        return exc.code
"""

BAD = """
import ys

def main(step: ys.Step, params: dict) -> None:
    step.run("count", int, "5", retry=5)
"""


def mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    user = tmp_path / "user.py"
    user.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=str(Path(ys.__file__).resolve().parent.parent))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--strict-optional", "user.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_users_mypy_checks_correct_use_of_ys_without_errors(tmp_path):
    result = mypy(tmp_path, GOOD)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_users_mypy_reports_a_misuse_of_ys(tmp_path):
    result = mypy(tmp_path, BAD)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'Argument "retry" to "run" of "Step" has incompatible type "int"' in result.stdout
    assert "py.typed" not in result.stdout
