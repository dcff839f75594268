"""Helpers for the durable-value tests: executions suspended on a key (through the store's
protocol, for the contract suite too), the workflows and the daemon homes of the end-to-end
tests, and the crash hook a daemon that must die inside a value commit loads.

Plain functions (no fixtures); the fixtures that use them are in conftest.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support import DaemonHandle, wait_until
from ys.outcomes import outcome_of

__all__ = [
    "T0",
    "DaemonHandle",
    "KEY",
    "suspend_waiters",
    "wait_until",
    "APPROVAL_WORKFLOW",
    "CRASH_SITECUSTOMIZE",
    "approval",
    "patient",
    "make_home",
    "store_path",
    "api_put",
    "api_get",
    "claimed",
    "waiting_on",
    "suspended_on",
]

T0 = 1_800_000_000.0  # a fixed "now" for store tests (explicit now= everywhere)
KEY = "approve/order-42"


def suspend_waiters(
    store: Any,
    key: str,
    n: int,
    *,
    now: float = T0,
    seen: int = 0,
    prefix: str = "waiter",
    step_key: str = "approval",
) -> list[str]:
    """Admit `n` executions, deliver each once, register it as a waiter on `key` (as
    step.wait_for does) and acknowledge it suspended: afterwards each is suspended with no
    pending wake (due_at None), so any wake a put requests is visible."""
    ids = [
        store.admit("approval", {"i": i}, execution_id=f"{prefix}-{i}", now=now).execution_id
        for i in range(n)
    ]
    deliveries = {d.execution_id: d for d in store.claim_due(now=now, limit=n + 100)}
    for eid in ids:
        d = deliveries[eid]
        assert store.value_wait(key, eid, step_key, seen, None, now=now) is None
        store.acknowledge(eid, d.token, outcome_of({"status": "suspended"}), now=now)
        record = store.get(eid)
        assert record.status == "suspended" and record.due_at is None
    return ids


APPROVAL_WORKFLOW = """
import ys


@ys.workflow
def main(step, params):
    value = step.wait_for("approval", params["key"], timeout=params.get("timeout"))
    return {"approved": value}
"""

# Put on PYTHONPATH (as sitecustomize.py) for a daemon that must die inside a store commit:
#   YS_TEST_KV_CRASH=waiter:N  SIGKILL when the put requests its Nth waiter's wake (mid-commit)
#   YS_TEST_KV_CRASH=after     SIGKILL right after a put committed (before the API answers)
CRASH_SITECUSTOMIZE = r"""
import os
import signal

_spec = os.environ.get("YS_TEST_KV_CRASH", "")
if _spec and not os.environ.get("YS_EXECUTION_ID"):  # the daemon, not its workers
    import ys.store.sql.values as _kv

    _what, _, _n = _spec.partition(":")

    def _kill():
        os.kill(os.getpid(), signal.SIGKILL)

    if _what == "waiter":
        _real, _woken = _kv.request_wake_tx, []

        def _request_wake_tx(*args, **kwargs):
            if str(kwargs.get("reason", args[4] if len(args) > 4 else "")).startswith(
                    "store key"):
                _woken.append(args[1])
                if len(_woken) == int(_n):
                    _kill()
            return _real(*args, **kwargs)

        _kv.request_wake_tx = _request_wake_tx
    elif _what == "after":
        _put = _kv.Values.value_put  # bound to each store when it opens: patch first

        def _value_put(self, *args, **kwargs):
            out = _put(self, *args, **kwargs)
            _kill()
            return out

        _kv.Values.value_put = _value_put
"""


# -- workflows for ys.testing.WorkflowTest ----------------------------------------------------


def approval(step: Any, params: dict[str, Any]) -> Any:
    """Wait for the approval key (params: key, timeout, newer_than) and return its value."""
    value = step.wait_for(
        "approval",
        params.get("key", KEY),
        timeout=params.get("timeout"),
        newer_than=params.get("newer_than", 0),
    )
    return {"approved": value}


def patient(step: Any, params: dict[str, Any]) -> Any:
    """Wait up to 60 s, catch the timeout, cool down for 600 s, return what the wait gave."""
    import ys

    try:
        value = step.wait_for("approval", KEY, timeout=60)
    except ys.WaitTimeout as exc:
        value = {"timed_out": exc.code}
    step.sleep("cool-down", 600)
    return value


# -- a real daemon ----------------------------------------------------------------------------


def make_home(root: Path, **extra_env: str) -> DaemonHandle:
    """A DaemonHandle in a new temp home under `root` (lease 3 s, retry base 0.2 s), with the
    approval workflow in its folder; not started."""
    home = root / "home"
    home.mkdir(mode=0o700)
    workflows = home / "workflows"
    workflows.mkdir(mode=0o700)
    h = DaemonHandle(
        home,
        workflows,
        {
            "YS_LEASE_SECONDS": "3",
            "YS_RETRY_BASE_SECONDS": "0.2",
            "YS_GRACE_SECONDS": "2",
            **extra_env,
        },
    )
    h.write("approval.py", APPROVAL_WORKFLOW)
    return h


def store_path(key: str) -> str:
    from urllib.parse import quote

    return "/v1/store/" + quote(key, safe="")


def api_put(
    daemon: DaemonHandle, key: str, value: Any, expected_version: int | None = None
) -> dict[str, Any]:
    """PUT /v1/store/KEY (what `ys store put` sends)."""
    from ys.client import Transport

    body: dict[str, Any] = {"value": value}
    if expected_version is not None:
        body["expected_version"] = expected_version
    t = Transport(str(daemon.socket), timeout=30)
    try:
        out: dict[str, Any] = t.request("PUT", store_path(key), body)
        return out
    finally:
        t.close()


def api_get(daemon: DaemonHandle, key: str) -> dict[str, Any]:
    from ys.client import Transport

    t = Transport(str(daemon.socket), timeout=30)
    try:
        out: dict[str, Any] = t.request("GET", store_path(key))
        return out
    finally:
        t.close()


def claimed(client: Any, execution_id: str) -> int:
    """How many deliveries the dispatcher started (claimed events in the whole history)."""
    n, token = 0, None
    while True:
        page = client.history(execution_id, limit=1000, page_token=token)
        n += sum(1 for e in page["events"] if e["kind"] == "claimed")
        token = page["next_page_token"]
        if not token:
            return n


def waiting_on(client: Any, execution_id: str) -> list[str]:
    """The store keys `describe` says the execution waits on."""
    return [
        w["key"] for w in client.describe(execution_id)["waiting_on"] if w.get("kind") == "store"
    ]


def suspended_on(client: Any, execution_id: str, key: str) -> bool:
    return client.get(execution_id)["status"] == "suspended" and waiting_on(
        client, execution_id
    ) == [key]
