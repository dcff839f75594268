"""Times through a real daemon: every time that enters the store is finite and within the
years 1970..9999 (one check, `check_time`), in the SDK (a ValueError the workflow sees, never
a save retried forever) and on every route (400 INVALID_ARGUMENT naming the field); and a
stored time out of that range (a row written before the check) never fails a read."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from raw_http import send

from tests.support import DaemonHandle, events, make_home, wait_until

pytestmark = pytest.mark.e2e

FAR = 1e12  # seconds: past the year 9999 from any now

# Each case asks for a time ys cannot store; the workflow catches what the SDK raises.
CASES = """
import ys

FAR = 1e12

def boom():
    raise RuntimeError("boom")

CASES = {
    "sleep-inf": lambda step: step.sleep("nap", float("inf")),
    "sleep-far": lambda step: step.sleep("nap", FAR),
    "until-inf": lambda step: step.sleep_until("nap", float("inf")),
    "until-nan": lambda step: step.sleep_until("nap", float("nan")),
    "until-far": lambda step: step.sleep_until("nap", FAR),
    "wait-inf": lambda step: step.wait_for("w", "never-put", timeout=float("inf")),
    "wait-far": lambda step: step.wait_for("w", "never-put", timeout=FAR),
    "retry-far": lambda step: step.run("r", boom, retry=ys.Retry(max_attempts=3, interval=FAR)),
    "effect-far": lambda step: step.effect(
        "e", effect_id="times:far", operation="op.v1", input={}, perform=lambda i: 1,
        lookup=lambda i: ys.NotFound(), retry_in=FAR),
}

@ys.workflow
def main(step, params):
    try:
        CASES[params["case"]](step)
    except (ValueError, ys.WorkflowEffectError) as exc:
        return {"refused": type(exc).__name__, "message": str(exc)}
    return "not refused"
"""

SLEEPER = """
import ys

@ys.workflow
def main(step, params):
    step.sleep("nap", 3600)
"""


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    with make_home(tmp_path_factory.mktemp("times")) as h:
        h.write("times.py", CASES)
        h.write("sleeper.py", SLEEPER)
        yield h.start()


def raw(h: DaemonHandle, method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    return send(h, method, path, body or None)


def suspended(h: DaemonHandle, execution_id: str) -> dict[str, Any]:
    c = h.client()
    c.trigger("sleeper", execution_id=execution_id)
    return wait_until(
        lambda: (r := c.get(execution_id))["status"] == "suspended" and r,
        message=f"{execution_id} suspended",
    )


@pytest.mark.parametrize(
    "case",
    [
        "sleep-inf",
        "sleep-far",
        "until-inf",
        "until-nan",
        "until-far",
        "wait-inf",
        "wait-far",
        "retry-far",
    ],
)
def test_a_time_past_9999_or_not_finite_is_a_value_error_in_the_workflow_not_a_retry(
    daemon: DaemonHandle, case: str
):
    c = daemon.client()
    c.trigger("times", {"case": case}, execution_id=f"times-{case}")
    record = c.wait(f"times-{case}", timeout=30)
    assert record["status"] == "completed", record
    result = record["outcome"]["result"]
    assert result["refused"] == "ValueError", result
    assert "step." in result["message"]
    assert record["attempts"] == 1  # one delivery: the refusal was never an infrastructure retry


def test_an_effect_whose_retry_in_ends_past_9999_is_an_invalid_effect_request(daemon: DaemonHandle):
    c = daemon.client()
    c.trigger("times", {"case": "effect-far"}, execution_id="times-effect-far")
    record = c.wait("times-effect-far", timeout=30)
    assert record["outcome"]["result"]["refused"] == "WorkflowEffectError", record
    assert "retry_in" in record["outcome"]["result"]["message"]
    assert record["attempts"] == 1


@pytest.mark.parametrize(
    "value",
    [b"Infinity", b"-Infinity", b"NaN", b"1e300", b"1e12", b"-1", b'"soon"', b"true", b"[1]"],
)
def test_the_wait_routes_refuse_a_time_that_is_not_finite_or_out_of_range_naming_the_field(
    daemon: DaemonHandle, value: bytes
):
    name = "tw-" + "".join(ch for ch in value.decode() if ch.isalnum() or ch in "-.")
    before = suspended(daemon, name)
    c = daemon.client()
    history = len(events(c, name))
    c.transport.request(
        "POST",
        "/v1/effects/times%3Aroute/begin",
        {"operation": "op.v1", "input": {}, "execution_id": name, "step_key": "e"},
    )
    for path, field in (
        (f"/v1/store/{name}-key/wait", b"timeout_at"),
        ("/v1/effects/times%3Aroute/wait", b"wake_at"),
    ):
        body = (
            b'{"execution_id": "'
            + name.encode()
            + b'", "step_key": "w", "'
            + field
            + b'": '
            + value
            + b"}"
        )
        status, err = raw(daemon, "POST", path, body)
        assert (status, err["code"]) == (400, "INVALID_ARGUMENT"), (path, err)
        assert field.decode() in err["message"]
    # nothing was written: the sleeper keeps its pending wake and its history
    after = c.get(name)
    assert after["due_at"] == before["due_at"] is not None
    assert len(events(c, name)) == history
    assert c.list(limit=1000)["executions"]  # and every read still answers


def test_a_nan_store_wait_timeout_does_not_remove_a_sleepers_pending_wake(daemon: DaemonHandle):
    before = suspended(daemon, "tw-nan")
    body = b'{"execution_id": "tw-nan", "step_key": "w", "timeout_at": NaN}'
    status, err = raw(daemon, "POST", "/v1/store/tw-nan-key/wait", body)
    assert (status, err["code"]) == (400, "INVALID_ARGUMENT")
    c = daemon.client()
    assert c.get("tw-nan")["due_at"] == before["due_at"] is not None
    assert c.describe("tw-nan")["waiting_on"] == []


def test_a_stored_time_out_of_range_never_fails_a_read(daemon: DaemonHandle):
    """A row written before every time was checked: get, list, ps, describe and the list
    route all answer, the time shown at the edge of the range."""
    suspended(daemon, "tw-stored")
    conn = sqlite3.connect(daemon.db, timeout=30)
    try:
        with conn:
            conn.execute("UPDATE executions SET due_at=1e300 WHERE execution_id='tw-stored'")
            conn.execute("UPDATE steps SET wake_at=9e999 WHERE execution_id='tw-stored'")
    finally:
        conn.close()
    last = "9999-12-31T23:59:59.999Z"
    for args in (["get", "tw-stored"], ["list"], ["ps"], ["describe", "tw-stored"]):
        result = daemon.ys(*args, "--json")
        assert result.returncode == 0, (args, result.stderr)
        assert last in result.stdout, args
    status, page = raw(daemon, "GET", "/v1/executions?limit=1000", b"")
    assert status == 200
    [record] = [r for r in page["executions"] if r["execution_id"] == "tw-stored"]
    assert record["due_at"] == last
    assert daemon.ys("get", "tw-stored").returncode == 0  # the rendering for people too
    path = f"/v1/executions/{quote('tw-stored', safe='')}/describe"
    assert raw(daemon, "GET", path, b"")[0] == 200


def test_a_duration_longer_than_ys_can_count_is_refused_naming_the_option(daemon: DaemonHandle):
    result = daemon.ys("gc", "--older-than", "99999999999999d", "--dry-run")
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("INVALID_ARGUMENT") and "--older-than" in line, line
