"""Every exit code of docs/API.md from the command line, each with its one stderr line.

7 (storage exhausted) comes from a stand-in daemon on a socket of its own that answers every
request with the daemon's RESOURCE_EXHAUSTED error: filling a real disk is the store suite's
business; what this checks is the CLI's side of the mapping.
"""

from __future__ import annotations

import http.server
import json
import shutil
import socketserver
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import admit, one_error_line, wait_status


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _Full(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _refuse(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps(
            {
                "code": "RESOURCE_EXHAUSTED",
                "message": "the disk or database is full; free space and retry",
            }
        )
        self.send_response(507)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = do_POST = _refuse

    def address_string(self) -> str:
        return "unix"

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def full_socket() -> Iterator[str]:
    folder = Path(tempfile.mkdtemp(prefix="ys-full-"))  # short: socket paths are limited
    server = _UnixServer(str(folder / "s"), _Full)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield str(folder / "s")
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(folder, ignore_errors=True)


def test_0_success(shared):
    assert shared.ys("trigger", "hello", "--id", "ec-0", "--wait").returncode == 0


def test_1_the_workflow_failed(shared):
    result = shared.ys("trigger", "boom", "--id", "ec-1", "--wait")
    assert result.returncode == 1
    assert "ec-1 failed: ValueError: boom" in result.stderr


def test_2_usage_or_invalid_input(shared):
    assert shared.ys("trigger").returncode == 2
    assert shared.ys("no-such-command").returncode == 2
    bad_id = shared.ys("trigger", "hello", "--id", "bad\x01id")
    assert bad_id.returncode == 2
    one_error_line(bad_id, "INVALID_ARGUMENT")


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ["trigger", "hello", "--idd", "x"],
            "no such option '--idd'; did you mean '--id' or '--in'?",
        ),
        (["retry", "--stauts", "failed"], "no such option '--stauts'; did you mean '--status'?"),
        (["list", "--tga", "x"], "no such option '--tga'; did you mean '--tag' or '--status'?"),
        (["history", "--al"], "no such option '--al'; did you mean '--all' or '--help'?"),
        (["daemon", "start", "--concurency", "2"], "did you mean '--concurrency'?"),
        (["store", "put", "--expect-versoin", "1", "k", "v"], "did you mean '--expect-version'?"),
        (["ps", "--zzzzzz"], "no such option '--zzzzzz'; see `ys ps --help`"),
    ],
)
def test_an_option_typo_is_worded_one_way_by_every_command(ys_home, args, said):
    result = ys_home.ys(*args)
    assert (result.returncode, result.stdout) == (2, "")
    line = one_error_line(result, "INVALID_ARGUMENT")
    assert line == f"INVALID_ARGUMENT: {said}" or line.endswith(said), line
    assert "Did you mean" not in line and "one of" not in line


def test_3_conflict(shared):
    admit(shared, "hello", "ec-3")
    assert shared.ys("trigger", "hello", "--id", "ec-3").returncode == 3


def test_4_not_found(shared):
    assert shared.ys("get", "ec-4-nobody").returncode == 4
    assert shared.ys("trigger", "no-such-workflow").returncode == 4


def test_5_the_daemon_cannot_be_reached(ys_home):
    result = ys_home.ys("ps")
    assert result.returncode == 5
    one_error_line(result, "DAEMON_UNAVAILABLE")


def test_6_timed_out(shared):
    admit(shared, "nap", "ec-6")
    wait_status(shared, "ec-6", "suspended")
    assert shared.ys("wait", "ec-6", "--timeout", "0.2s").returncode == 6


def test_7_storage_exhausted(ys_home, full_socket):
    result = ys_home.ys("trigger", "hello", env={"YS_SOCKET": full_socket})
    assert result.returncode == 7
    assert one_error_line(result, "RESOURCE_EXHAUSTED") == (
        "RESOURCE_EXHAUSTED: the disk or database is full; free space and retry"
    )
