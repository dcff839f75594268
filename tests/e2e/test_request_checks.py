"""Malformed requests through a real daemon: every route reads its body and query into a
typed request before anything else (the delivery token, the registry, the store), and a
malformed one is a 4xx `{"code", "message"}` naming the field, never a 500, with the daemon
alive after each. Page tokens: anything but a token the daemon made is INVALID_ARGUMENT."""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from raw_http import send

import ys
from tests.support import DaemonHandle, make_home, wait_until
from ys.client import Client
from ys.errors import InvalidArgument

pytestmark = pytest.mark.e2e

SLEEPER = """
import ys

@ys.workflow
def main(step, params):
    step.sleep("nap", 3600)
"""

ID = "rc-sleeper"  # a suspended execution every execution route can name
E = f"/v1/executions/{ID}"

# Every route that reads a body (a valid-looking path each, so only the body can be wrong).
# The routes documented without one (shutdown, wake, cancel, lease, pause, resume) read none.
BODY_ROUTES = [
    ("POST", "/v1/executions"),
    ("PUT", E + "/steps/nap"),
    ("POST", E + "/starts/child"),
    ("POST", E + "/outcome"),
    ("PUT", "/v1/store/rc-key"),
    ("POST", "/v1/store/rc-key/wait"),
    ("POST", "/v1/schedules"),
    ("POST", "/v1/gc"),
    ("POST", "/v1/effects/rc-effect/begin"),
    ("POST", "/v1/effects/rc-effect/settle"),
    ("POST", "/v1/effects/rc-effect/wait"),
]

# Bodies that no route can read.
MALFORMED = {
    "not-json": (b"{", {}),
    "array": (b"[1]", {}),
    "text": (b'"x"', {}),
    "null": (b"null", {}),
    "number": (b"5", {}),
    "nested-1000": (b'{"a": ' + b"[" * 1000 + b"]" * 1000 + b"}", {}),
    "nested-5000-objects": (b'{"a": ' + b'{"a": ' * 5000 + b"1" + b"}" * 5001, {}),
    "5000-digits": (b'{"a": ' + b"1" * 5000 + b"}", {}),
    "not-utf8": (b'{"a": "\xff\xfe"}', {}),
    "corrupt-gzip": (b"\x1f\x8b\x08\x00 this is not gzip", {"Content-Encoding": "gzip"}),
    "corrupt-deflate": (b"not deflate at all", {"Content-Encoding": "deflate"}),
}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    with make_home(tmp_path_factory.mktemp("checks")) as h:
        h.write("sleeper.py", SLEEPER)
        h.start()
        c = h.client()
        c.trigger("sleeper", execution_id=ID)
        wait_until(lambda: c.get(ID)["status"] == "suspended", message="the sleeper suspended")
        c.schedule_add("rc-schedule", "sleeper", "0 3 * * *")
        c.schedule_pause("rc-schedule")
        yield h


def refused(
    h: DaemonHandle,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    status: int = 400,
    code: str = "INVALID_ARGUMENT",
) -> str:
    """Assert the refusal and a live daemon; returns the message."""
    got, err = send(h, method, path, body, headers)
    assert (got, err and err.get("code")) == (status, code), (method, path, body, err)
    assert set(err) == {"code", "message"} and err["message"], err
    assert "\n" not in err["message"]  # one line on a terminal
    assert h.client(timeout=10).version()["pid"]  # still alive
    return str(err["message"])


def sleeper_unchanged(h: DaemonHandle) -> None:
    record = h.client().get(ID)
    assert (record["status"], record["cancel_requested"]) == ("suspended", False), record


@pytest.mark.parametrize("malformed", list(MALFORMED))
@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_a_body_no_route_can_read_is_400_and_the_daemon_lives_on(
    daemon: DaemonHandle, method: str, path: str, malformed: str
):
    body, headers = MALFORMED[malformed]
    refused(daemon, method, path, body, headers)
    sleeper_unchanged(daemon)


def test_nesting_below_the_json_limit_is_an_ordinary_refusal(daemon: DaemonHandle):
    body = json.dumps(
        {
            "workflow": "sleeper",
            "params": {"a": json.loads("[" * 900 + "]" * 900)},
            "execution_id": "rc-deep",
        }
    ).encode()
    message = refused(daemon, "POST", "/v1/executions", body, code="INVALID_EXECUTION_EVENT")
    assert "params" in message
    assert send(daemon, "GET", "/v1/executions/rc-deep")[0] == 404


TOKEN = {"X-Ys-Token": "not-the-delivery-token"}
STEP = {"kind": "sleep", "status": "waiting", "value": None, "attempts": 1, "wake_at": None}
WAIT = {"execution_id": ID, "step_key": "w", "seen": 0, "timeout_at": None}
SCHEDULE = {"name": "rc-new", "workflow": "sleeper", "cron": "0 3 * * *"}
EFFECT = {"execution_id": ID, "step_key": "e"}


def field(base: dict[str, Any], name: str, raw: str) -> bytes:
    """`base` with `name` set to the raw JSON text `raw` (NaN and Infinity as Python's json
    reads them)."""
    text = json.dumps({k: v for k, v in base.items() if k != name})
    return (text[:-1] + (", " if len(text) > 2 else "") + f'"{name}": {raw}}}').encode()


# (method, path, base body, field, raw values, headers): each value refused naming the field
FIELDS = [
    (
        "POST",
        "/v1/executions",
        {"workflow": "sleeper"},
        "workflow",
        ["5", "null", "[]", '"../etc"', '""'],
        {},
    ),
    (
        "POST",
        "/v1/executions",
        {"workflow": "sleeper"},
        "params",
        ['"str"', "[1]", "5", "true"],
        {},
    ),
    (
        "POST",
        "/v1/executions",
        {"workflow": "sleeper"},
        "context",
        ['"str"', "[1]", "5", "true"],
        {},
    ),
    ("POST", "/v1/executions", {"workflow": "sleeper"}, "execution_id", ["5", "[]"], {}),
    (
        "POST",
        "/v1/executions",
        {"workflow": "sleeper"},
        "if_exists",
        ['"sometimes"', "5", "true"],
        {},
    ),
    (
        "PUT",
        E + "/steps/nap",
        STEP,
        "attempts",
        ['"x"', "[]", "null", "NaN", "Infinity", "1.5", "true", "0", "-1", str(2**64)],
        TOKEN,
    ),
    (
        "PUT",
        E + "/steps/nap",
        STEP,
        "wake_at",
        ['"x"', "NaN", "Infinity", "1e300", "-1", "true"],
        TOKEN,
    ),
    ("PUT", E + "/steps/nap", STEP, "status", ['"done"', "5"], TOKEN),
    ("PUT", E + "/steps/nap", STEP, "kind", ["5", "null"], TOKEN),
    ("PUT", E + "/steps/nap", STEP, "value", ["5", "{}"], TOKEN),
    (
        "POST",
        E + "/starts/child",
        {"workflow": "sleeper"},
        "detached",
        ['"false"', "1", "null"],
        {},
    ),
    ("POST", E + "/starts/child", {"workflow": "sleeper"}, "workflow", ["5", "null"], {}),
    ("POST", E + "/outcome", {}, "outcome", ['"completed"', "[1]", "5", "true"], TOKEN),
    (
        "PUT",
        "/v1/store/rc-key",
        {"value": 1},
        "expected_version",
        ['"1"', "-1", "1.5", "true", "NaN", str(2**64)],
        {},
    ),
    (
        "POST",
        "/v1/store/rc-key/wait",
        WAIT,
        "seen",
        ['"x"', "NaN", "-1", "1.5", "true", "null", str(2**64)],
        {},
    ),
    (
        "POST",
        "/v1/store/rc-key/wait",
        WAIT,
        "timeout_at",
        ['"x"', "NaN", "Infinity", "1e300", "true"],
        {},
    ),
    ("POST", "/v1/store/rc-key/wait", WAIT, "execution_id", ["5", "null"], {}),
    (
        "POST",
        "/v1/schedules",
        SCHEDULE,
        "jitter",
        ['"x"', "NaN", "Infinity", "-1", "true", "null", "1e300"],
        {},
    ),
    ("POST", "/v1/schedules", SCHEDULE, "max_late", ['"x"', "NaN", "-1", "true"], {}),
    ("POST", "/v1/schedules", SCHEDULE, "params", ['"str"', "[1]", "5"], {}),
    ("POST", "/v1/schedules", SCHEDULE, "catch_up", ['"sometimes"', "5"], {}),
    ("POST", "/v1/schedules", SCHEDULE, "cron", ["5", "null"], {}),
    (
        "POST",
        "/v1/gc",
        {"dry_run": True},
        "older_than",
        ["true", '"x"', "NaN", "Infinity", "-1", "[]"],
        {},
    ),
    ("POST", "/v1/gc", {"older_than": 1e9}, "dry_run", ['"yes"', "1", "null"], {}),
    (
        "POST",
        "/v1/effects/rc-effect/begin",
        {"operation": "op.v1", "input": {}, **EFFECT},
        "step_key",
        ["5", "null"],
        {},
    ),
    (
        "POST",
        "/v1/effects/rc-effect/settle",
        {"operation": "op.v1"},
        "result",
        ["5", "null", '"not canonical"'],
        {},
    ),
    (
        "POST",
        "/v1/effects/rc-effect/wait",
        EFFECT,
        "wake_at",
        ["null", '"x"', "NaN", "Infinity", "1e300", "true"],
        {},
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "base", "name", "values", "headers"),
    FIELDS,
    ids=[f"{m} {p} {n}" for m, p, _, n, _, _ in FIELDS],
)
def test_a_field_of_the_wrong_type_or_range_is_400_naming_it_before_the_token_is_checked(
    daemon: DaemonHandle,
    method: str,
    path: str,
    base: dict[str, Any],
    name: str,
    values: list[str],
    headers: dict[str, str],
):
    for raw in values:
        message = refused(daemon, method, path, field(base, name, raw), headers)
        # the field, not the (stale) delivery token nor anything later, is what is refused
        assert name in message, (raw, message)
    sleeper_unchanged(daemon)
    assert send(daemon, "GET", "/v1/schedules/rc-new")[0] == 404  # nothing half-written
    listed = daemon.client().list(limit=1000)["executions"]
    assert [r["execution_id"] for r in listed] == [ID]  # nothing admitted


def test_a_wait_on_an_effect_never_begun_is_400_naming_it(daemon: DaemonHandle):
    body = json.dumps({**EFFECT, "wake_at": 2e9}).encode()
    message = refused(daemon, "POST", "/v1/effects/rc-never-begun/wait", body)
    assert "rc-never-begun" in message and "begin" in message


# Query parameters: (path, parameter, raw values)
QUERIES = [
    ("/v1/executions", "limit", ["x", "-1", "1.5", "1e3", "1001", "9" * 30]),
    ("/v1/executions", "status", ["bogus"]),
    (E + "/history", "limit", ["x", "-1", "1001"]),
    (E + "/wait", "timeout", ["x", "nan", "inf", "-1"]),
    (E + "/wait", "after", ["x", "-1", "1.5"]),
    ("/v1/schedules/rc-schedule/next", "n", ["x", "1.5"]),
    ("/v1/effects", "status", ["bogus"]),
]


@pytest.mark.parametrize(
    ("path", "name", "values"), QUERIES, ids=[f"{p} {n}" for p, n, _ in QUERIES]
)
def test_a_query_parameter_of_the_wrong_type_or_range_is_400_naming_it(
    daemon: DaemonHandle, path: str, name: str, values: list[str]
):
    for raw in values:
        message = refused(daemon, "GET", f"{path}?{name}={raw}")
        assert name in message, (raw, message)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


BAD_TOKENS = [
    "%%not-a-token%%",
    "!!",
    "A",
    "AAAA",
    "gAAAAAAAAAA=",
    "gAAAAAAAAAA.",
    "a b",
    "x" * 5000,
    _b64(b"\x00" * 9),
    _b64(b'[1e400, "x"]'),
    _b64(b'[NaN, "x"]'),
    _b64(b"[1, 2]"),
    _b64(b"[" * 1500 + b"]" * 1500),
    _b64(b"\xff\xfe"),
    _b64(b'[true, "x"]'),
]


@pytest.mark.parametrize("path", ["/v1/executions", E + "/history"])
def test_every_malformed_page_token_on_every_paged_route_is_invalid_argument(
    daemon: DaemonHandle, path: str
):
    from urllib.parse import quote

    for token in BAD_TOKENS:
        message = refused(daemon, "GET", f"{path}?page_token={quote(token)}")
        assert "page token" in message, (token, message)


def test_a_token_the_daemon_made_pages_on(daemon: DaemonHandle):
    c = daemon.client()
    first = c.history(ID, limit=1)
    rest = c.history(ID, limit=1000, page_token=first["next_page_token"])
    assert [e["seq"] for e in first["events"] + rest["events"]][:2] == [1, 2]


@pytest.mark.parametrize("command", ["history", "list"])
def test_ys_with_a_malformed_page_token_exits_2_with_invalid_argument(
    daemon: DaemonHandle, command: str
):
    args = [command, ID] if command == "history" else [command]
    result = daemon.ys(*args, "--page-token", "%%not-a-token%%")
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "INVALID_ARGUMENT" in line and "page token" in line


def test_the_client_refuses_params_or_context_that_are_not_objects_without_sending(tmp_path: Any):
    c = Client(str(tmp_path / "no-daemon.sock"))  # sending would be DAEMON_UNAVAILABLE
    for bad in ("str", [1], 5, True):
        with pytest.raises(InvalidArgument, match="params must be an object"):
            c.trigger("sleeper", bad)
        with pytest.raises(InvalidArgument, match="context must be an object"):
            c.trigger("sleeper", {}, context=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value, said",
    [
        ({1, 2}, "a set is not a durable value"),
        (dt.datetime(2026, 1, 1), "a datetime object is not a durable value"),
    ],
    ids=["set", "datetime"],
)
def test_the_client_refuses_a_value_that_is_not_durable_with_the_sdks_message(
    tmp_path: Any, value: Any, said: str
):
    c = Client(str(tmp_path / "no-daemon.sock"))  # sending would be DAEMON_UNAVAILABLE
    with pytest.raises(InvalidArgument, match=f"params.when: {said}"):
        c.trigger("sleeper", {"when": value})
    with pytest.raises(InvalidArgument, match=f"value.when: {said}"):
        c.store_put("k", {"when": value})


def test_client_wait_past_its_timeout_raises_with_the_record(daemon: DaemonHandle):
    daemon.write("sleeper.py", SLEEPER)
    c = daemon.client()
    c.trigger("sleeper", execution_id="wait-timeout")
    with pytest.raises(ys.ExecutionTimeout) as info:
        c.wait("wait-timeout", timeout=0.5)
    assert info.value.code == "TIMEOUT" and info.value.exit_code == 6
    assert info.value.record["status"] in ("admitted", "running", "suspended")
    with pytest.raises(ys.ExecutionTimeout):
        c.wait("wait-timeout", timeout="1s")  # a duration, as `ys wait --timeout 1s`
    for bad in ("soon", [1], -1):
        with pytest.raises(InvalidArgument, match="timeout"):
            c.wait("wait-timeout", timeout=bad)  # type: ignore[arg-type]
