"""`ys ui`: a port on 127.0.0.1 forwarded to the daemon's /ui/ pages, and nothing else."""

from __future__ import annotations

import http.client
import json
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support import DaemonHandle, wait_until

pytestmark = pytest.mark.e2e


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    port: int

    def request(
        self, method: str, path: str, headers: dict[str, str] | None = None, body: str | None = None
    ) -> tuple[int, Any, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read().decode("utf-8", "replace")
        finally:
            conn.close()


@pytest.fixture
def served(daemon: DaemonHandle) -> Iterator[Served]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ys", "ui", "--no-open", "--json"],
        env=daemon.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else "no output"
        shown = json.loads(line)
        yield Served(proc, shown["url"], shown["port"])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _cookie(headers: Any) -> str:
    return headers["Set-Cookie"].split(";", 1)[0]


def test_the_printed_url_signs_in_and_only_the_dashboard_is_forwarded(served: Served):
    parts = urlsplit(served.url)
    assert parts.hostname == "127.0.0.1" and parts.port == served.port
    assert parts.path == "/ui/" and re.fullmatch(r"token=[\w-]{20,}", parts.query)
    status, _, text = served.request("GET", "/ui/")
    assert status == 403 and "ys ui" in text
    status, headers, _ = served.request("GET", f"{parts.path}?{parts.query}")
    assert status == 303 and headers["Location"] == "/ui/"
    cookie = _cookie(headers)
    status, headers, text = served.request("GET", "/ui/", {"Cookie": cookie})
    assert status == 200 and "<h1>Now</h1>" in text
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    status, _, _ = served.request("GET", "/ui/static/ys.css", {"Cookie": cookie})
    assert status == 200
    # the API is not reachable through the port, with or without the cookie
    for path in ("/v1/version", "/v1/ui/tokens"):
        assert served.request("GET", path, {"Cookie": cookie})[0] == 404
        assert served.request("POST", path, {"Cookie": cookie})[0] == 404
    status, headers, _ = served.request("GET", "/")
    assert status == 302 and headers["Location"] == "/ui/"
    # a page that rebinds its own host name to 127.0.0.1 gets nothing
    rebound = {"Cookie": cookie, "Host": f"evil.example:{served.port}"}
    assert served.request("GET", "/ui/", rebound)[0] == 403
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(timeout=20) == 0


def test_an_action_through_the_port(daemon: DaemonHandle, served: Served):
    daemon.write(
        "nap.py",
        "import ys\n\n@ys.workflow\ndef main(step, params):\n    step.sleep('nap', 3600)\n",
    )
    c = daemon.client()
    c.trigger("nap", execution_id="via/port")
    wait_until(lambda: c.get("via/port")["status"] == "suspended", message="suspended")
    parts = urlsplit(served.url)
    _, headers, _ = served.request("GET", f"{parts.path}?{parts.query}")
    cookie = _cookie(headers)
    _, _, page = served.request("GET", "/ui/executions/via%2Fport", {"Cookie": cookie})
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf
    form = f"csrf={csrf.group(1)}&confirm=1"
    origin = f"http://127.0.0.1:{served.port}"
    status, headers, _ = served.request(
        "POST",
        "/ui/executions/via%2Fport/cancel",
        {"Cookie": cookie, "Origin": origin, "Content-Type": "application/x-www-form-urlencoded"},
        form,
    )
    assert status == 303
    assert c.wait("via/port", timeout=30)["status"] == "cancelled"


def test_a_port_in_use_is_refused_in_one_line(daemon: DaemonHandle):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = daemon.ys("ui", "--no-open", "--port", str(port), timeout=30)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("INVALID_ARGUMENT: ")
    assert f"127.0.0.1:{port}" in out.stderr and "--port" in out.stderr
