"""docs/API.md documents exactly the routes the daemon serves, and curl works against it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, DaemonHandle
from ys.daemon.api import Api


def documented_routes() -> set[tuple[str, str]]:
    text = (REPO / "docs" / "API.md").read_text()
    return set(re.findall(r"^### `(GET|POST|PUT|PATCH|DELETE) (/\S+)`$", text, flags=re.M))


def served_routes() -> set[tuple[str, str]]:
    return {(r.method, r.path) for r in Api(None).routes()}


def test_documented_routes_are_the_served_routes():
    assert documented_routes() == served_routes()


def test_every_error_code_the_daemon_maps_is_documented():
    from ys.errors import _CODES

    text = (REPO / "docs" / "API.md").read_text()
    client_side = {"DAEMON_UNAVAILABLE", "TIMEOUT"}
    missing = [c for c in _CODES if c not in client_side and f"`{c}`" not in text]
    assert missing == []


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_works_against_the_socket(daemon: DaemonHandle, tmp_path: Path):
    daemon.write("hello.py", (REPO / "examples/workflows/hello.py").read_text())
    out = subprocess.run(
        [
            "curl",
            "-sS",
            "--unix-socket",
            str(daemon.socket),
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-d",
            json.dumps({"workflow": "hello", "execution_id": "curl/1", "params": {"name": "curl"}}),
            "http://ys/v1/executions",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == {"execution_id": "curl/1", "started": True}
    record = daemon.client().wait("curl/1", timeout=30)
    assert record["outcome"]["result"] == {"greeting": "hello, curl"}
    got = subprocess.run(
        ["curl", "-sS", "--unix-socket", str(daemon.socket), "http://ys/v1/executions/curl%2F1"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(got.stdout)["status"] == "completed"
    missing = subprocess.run(
        [
            "curl",
            "-sS",
            "-w",
            "%{http_code}",
            "--unix-socket",
            str(daemon.socket),
            "http://ys/v1/nope",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert missing.stdout.endswith("404")
    assert json.loads(missing.stdout[:-3])["code"] == "NOT_FOUND"
