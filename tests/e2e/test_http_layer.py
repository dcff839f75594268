"""The HTTP layer under the routes, seen from raw socket clients: what aiohttp's parser refuses
comes back as the API's {"code", "message"} JSON with a 4xx status, a body over the limit is
refused from its Content-Length before it is sent, and partial requests time out (the daemon
here runs with YS_READ_TIMEOUT_SECONDS=1). After each, the daemon still answers."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import EXAMPLES, DaemonHandle, make_home, wait_until

pytestmark = pytest.mark.e2e

DEADLINE = 20.0  # what a client waits for any answer: far past the 1 s read timeout


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    with make_home(Path(tmp_path_factory.mktemp("http")), YS_READ_TIMEOUT_SECONDS="1") as h:
        yield h.start()


def connect(daemon: DaemonHandle) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(DEADLINE)
    s.connect(str(daemon.socket))
    return s


def answer(s: socket.socket) -> tuple[int, str, dict]:
    """The next response on `s` (read by http.client): status, content type, JSON body."""
    resp = http.client.HTTPResponse(s)
    resp.begin()
    body = resp.read()
    return resp.status, resp.getheader("Content-Type", ""), json.loads(body)


def exchange(daemon: DaemonHandle, data: bytes) -> tuple[int, str, dict]:
    with connect(daemon) as s:
        s.sendall(data)
        return answer(s)


def closed_without_answer(s: socket.socket) -> bool:
    return s.recv(65536) == b""


def still_answers(daemon: DaemonHandle) -> None:
    with daemon.client(timeout=DEADLINE) as c:
        assert c.version()["pid"] == daemon.proc.pid  # type: ignore[union-attr]


def head(first: bytes, *lines: bytes) -> bytes:
    return first + b"\r\n" + b"".join(line + b"\r\n" for line in lines) + b"\r\n"


BAD_REQUESTS = {
    "bad request line": (b"GARBAGE\r\n\r\n", 400),
    "not HTTP at all": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),
    "bad Content-Length": (
        head(b"POST /v1/executions HTTP/1.1", b"Host: ys", b"Content-Length: abc"),
        400,
    ),
    "two Content-Lengths": (
        head(
            b"POST /v1/executions HTTP/1.1", b"Host: ys", b"Content-Length: 2", b"Content-Length: 3"
        )
        + b"{}",
        400,
    ),
    "bad chunk size": (
        head(b"POST /v1/executions HTTP/1.1", b"Host: ys", b"Transfer-Encoding: chunked")
        + b"zz\r\n",
        400,
    ),
    "header line over the limit": (
        head(b"GET /v1/version HTTP/1.1", b"Host: ys", b"X-Big: " + b"a" * 9000),
        431,
    ),
    "request line over the limit": (
        head(b"GET /v1/executions?workflow=" + b"a" * 9000 + b" HTTP/1.1", b"Host: ys"),
        431,
    ),
    "unknown Expect": (
        head(b"POST /v1/gc HTTP/1.1", b"Host: ys", b"Expect: coffee", b"Content-Length: 2") + b"{}",
        417,
    ),
    "too many headers": (
        head(b"GET /v1/version HTTP/1.1", b"Host: ys", *(b"X-H%d: 1" % i for i in range(200))),
        431,
    ),
}


@pytest.mark.parametrize("name", list(BAD_REQUESTS))
def test_what_the_parser_refuses_is_a_json_error(daemon: DaemonHandle, name: str):
    data, status = BAD_REQUESTS[name]
    got, content_type, body = exchange(daemon, data)
    assert got == status
    assert content_type.startswith("application/json")
    assert set(body) == {"code", "message"} and body["code"] == "INVALID_ARGUMENT"
    assert body["message"] and "\n" not in body["message"]
    still_answers(daemon)


@pytest.mark.parametrize(
    "target", [b"ys:443", b"/v1/version", b"/v1/executions"], ids=["authority", "get", "post"]
)
def test_a_connect_request_is_answered_405_in_the_error_form(daemon: DaemonHandle, target: bytes):
    with connect(daemon) as s:
        s.sendall(head(b"CONNECT " + target + b" HTTP/1.1", b"Host: ys"))
        got, content_type, body = answer(s)
        # no tunnel is opened: the daemon closes the connection after its answer
        assert closed_without_answer(s)
    assert got == 405
    assert content_type.startswith("application/json")
    assert body["code"] == "METHOD_NOT_ALLOWED" and "CONNECT" in body["message"]
    assert set(body) == {"code", "message"}
    still_answers(daemon)


def test_a_body_over_the_limit_is_refused_from_its_content_length(daemon: DaemonHandle):
    # Only the head is sent: the answer must come without waiting for 1 TB of body.
    with connect(daemon) as s:
        s.sendall(
            head(
                b"POST /v1/executions HTTP/1.1",
                b"Host: ys",
                b"Content-Type: application/json",
                b"Content-Length: 1000000000000",
            )
        )
        status, content_type, body = answer(s)
    assert status == 413 and content_type.startswith("application/json")
    assert body["code"] == "INVALID_ARGUMENT" and "over 3 MiB" in body["message"]
    still_answers(daemon)


def test_a_body_over_the_limit_is_not_invited_with_100_continue(daemon: DaemonHandle):
    with connect(daemon) as s:
        s.sendall(
            head(
                b"POST /v1/executions HTTP/1.1",
                b"Host: ys",
                b"Expect: 100-continue",
                b"Content-Type: application/json",
                b"Content-Length: 1000000000000",
            )
        )
        first = s.makefile("rb").readline()  # http.client would skip a 100 Continue
    assert first.split()[1] == b"413"
    still_answers(daemon)


def test_a_partial_request_head_is_closed_after_the_read_timeout(daemon: DaemonHandle):
    with connect(daemon) as s:
        s.sendall(b"GET /v1/version HTTP/1.1\r\nHost: ys\r\n")  # no blank line: never ends
        assert closed_without_answer(s)
    still_answers(daemon)


def test_a_connection_that_sends_nothing_is_closed_after_the_read_timeout(daemon: DaemonHandle):
    # A flood of connect-and-wait connections must not hold the daemon's descriptors.
    with connect(daemon) as s:
        assert closed_without_answer(s)
    still_answers(daemon)


def test_an_idle_connection_the_daemon_closed_is_not_reused_for_a_post(
    tmp_path_factory: pytest.TempPathFactory,
):
    """After the keep-alive time the daemon closes an idle connection; the client's next
    request, a POST that is never resent, goes on a new connection and is admitted once."""
    from ys.client import Transport

    home = Path(tmp_path_factory.mktemp("keepalive"))
    with make_home(home, YS_KEEPALIVE_SECONDS="1") as h:
        h.start()
        h.write("hello.py", (EXAMPLES / "hello.py").read_text())
        t = Transport(str(h.socket))
        try:
            assert t.request("GET", "/v1/version")["pid"] > 0
            first = t._conn
            assert first is not None
            wait_until(first.dropped, timeout=DEADLINE, message="the idle connection closed")
            out = t.request("POST", "/v1/executions", {"workflow": "hello", "execution_id": "ka-1"})
            assert out["execution_id"] == "ka-1" and out["started"] is True
            assert t._conn is not first
        finally:
            t.close()
        listed = h.client().list()["executions"]
        assert [r["execution_id"] for r in listed] == ["ka-1"]


def test_a_partial_body_is_answered_408_after_the_read_timeout(daemon: DaemonHandle):
    with connect(daemon) as s:
        s.sendall(
            head(
                b"POST /v1/executions HTTP/1.1",
                b"Host: ys",
                b"Content-Type: application/json",
                b"Content-Length: 100",
            )
            + b'{"workflow": '
        )
        status, content_type, body = answer(s)
        assert status == 408 and content_type.startswith("application/json")
        assert body["code"] == "INVALID_ARGUMENT" and "within 1 s" in body["message"]
        assert closed_without_answer(s)  # the rest of that request never comes: done
    still_answers(daemon)


def test_an_idle_keep_alive_connection_outlives_the_read_timeout(daemon: DaemonHandle):
    # A worker keeps its connection between calls for as long as a step runs, and ys.Client
    # resends only GETs on a connection the daemon dropped: idle is not partial.
    body = b'{"value": 1}'
    put = head(
        b"PUT /v1/store/idle HTTP/1.1",
        b"Host: ys",
        b"Content-Type: application/json",
        b"Content-Length: %d" % len(body),
    )
    with connect(daemon) as idle:
        idle.sendall(put)  # the head and the body in two writes, as a big body arrives
        idle.sendall(body)
        assert answer(idle)[0] == 200
        # Another connection's partial head is closed by the timeout; this one, idle since
        # before it began, is not.
        with connect(daemon) as partial:
            partial.sendall(b"GET /v1/version HTTP/1.1\r\n")
            assert closed_without_answer(partial)
        idle.sendall(put + body)
        status, _, stored = answer(idle)
        assert status == 200 and stored["version"] == 2


def test_a_request_with_its_own_timeout_leaves_the_kept_connection_open_and_closable(
    daemon: DaemonHandle,
):
    """A request given its own timeout goes on a connection of its own: when it times out,
    the kept connection is neither closed under the client nor forgotten unclosed (which
    leaked a socket: a ResourceWarning, an error in this suite)."""
    from ys.client import Transport
    from ys.errors import DaemonUnavailable

    t = Transport(str(daemon.socket))
    try:
        assert t.request("GET", "/v1/version")["pid"] > 0
        kept = t._conn
        assert kept is not None and kept.sock is not None
        with pytest.raises(DaemonUnavailable, match="did not answer within 0.2 s"):
            t.request("GET", "/v1/events?wait=10", timeout=0.2)  # a long poll: nothing comes
        assert t._conn is kept and kept.sock is not None and not kept.dropped()
        assert t.request("GET", "/v1/version")["pid"] > 0
        assert t._conn is kept  # reused, not replaced
    finally:
        t.close()
    assert kept.sock is None and t._conn is None
