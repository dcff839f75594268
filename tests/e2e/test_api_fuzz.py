"""Fuzz every route of docs/openapi.json against a real daemon with schemathesis: requests
made from the document (valid and invalid ones), each answer checked for no server error, a
documented status, the JSON content type and a body that matches its schema.

Bounded: a few examples per route, one fixed seed, no stateful phase. Schemathesis talks
to the Unix socket through a requests session whose adapter connects there.
`POST /v1/shutdown` would stop the daemon under the fuzz: it is checked once on its own.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from requests.adapters import HTTPAdapter
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool

from tests.support import EXAMPLES, REPO, DaemonHandle, make_home, wait_until

pytestmark = pytest.mark.e2e

BASE_URL = "http://ys"  # the host name is not used: every connection goes to the socket
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": 20261201,  # the same cases on every run: a failure here is reproducible
        "generation": {"max-examples": 50},
        "phases": {"stateful": {"enabled": False}},
    }
)
SCHEMA = schemathesis.openapi.from_path(REPO / "docs" / "openapi.json", config=CONFIG)


# -- requests over the daemon's Unix socket ---------------------------------------------------


class _UnixConnection(HTTPConnection):
    def __init__(self, path: str, **kw: Any) -> None:
        super().__init__("localhost", **kw)
        self._path = path

    def _new_conn(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout if isinstance(self.timeout, int | float) else 30)
        sock.connect(self._path)
        return sock


class _UnixPool(HTTPConnectionPool):
    def __init__(self, path: str) -> None:
        super().__init__("localhost")
        self._path = path

    def _new_conn(self) -> HTTPConnection:
        return _UnixConnection(self._path, timeout=self.timeout.connect_timeout)


class UnixAdapter(HTTPAdapter):
    """Sends every request of the session to the Unix socket at `path`."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._pool = _UnixPool(path)

    def get_connection_with_tls_context(
        self, request: Any, verify: Any, proxies: Any = None, cert: Any = None
    ) -> HTTPConnectionPool:
        return self._pool

    def close(self) -> None:
        self._pool.close()
        super().close()


def unix_session(path: Path) -> requests.Session:
    s = requests.Session()
    s.mount(BASE_URL, UnixAdapter(str(path)))
    return s


# -- the checks -------------------------------------------------------------------------------


def no_server_error(ctx: Any, response: Any, case: Any) -> None:
    """No 5xx, on any route, for any body."""
    if response.status_code >= 500:
        raise AssertionError(
            f"{case.operation.label} answered {response.status_code}: {response.content[:300]!r}"
        )


CHECKS = [
    no_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


# -- the daemon under the fuzz ----------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[requests.Session]:
    """A daemon with the `hello` workflow and the completed execution `order-42` (the IDs
    and names the document's examples use), and a session to its socket."""
    with make_home(Path(tmp_path_factory.mktemp("fuzz"))) as daemon:
        daemon.start()
        daemon.write("hello.py", (EXAMPLES / "hello.py").read_text())
        with daemon.client(timeout=30) as c:
            wait_until(lambda: any(w["name"] == "hello" for w in c.workflows()["workflows"]))
            c.trigger("hello", {"name": "ys"}, execution_id="order-42")
            assert c.wait("order-42", timeout=30)["status"] == "completed"
        with unix_session(daemon.socket) as session:
            yield session


@SCHEMA.exclude(path="/v1/shutdown").parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_every_route_answers_as_documented(case: Any, fuzzed: requests.Session) -> None:
    response = case.call(session=fuzzed, base_url=BASE_URL, timeout=30)
    case.validate_response(response, checks=CHECKS)


def test_shutdown_answers_as_documented(daemon: DaemonHandle) -> None:
    case = SCHEMA["/v1/shutdown"]["POST"].Case()
    with unix_session(daemon.socket) as session:
        response = case.call(session=session, base_url=BASE_URL, timeout=30)
    case.validate_response(response, checks=CHECKS)
    assert response.json()["stopping"] is True
    assert daemon.proc is not None
    wait_until(lambda: daemon.proc.poll() is not None, message="the daemon to stop")
