"""An approval flow end to end, against a real daemon: a workflow waits on `approve/order-42`,
a put wakes it once and it completes with the value; a put before the wait is seen at once;
puts merge into one delivery; and a daemon killed with SIGKILL inside a put's commit, or right
after it, loses neither the value nor the wakes it committed (RFC 001's store-commit row)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from kv_support import (
    CRASH_SITECUSTOMIZE,
    KEY,
    DaemonHandle,
    api_get,
    api_put,
    claimed,
    suspended_on,
    wait_until,
    waiting_on,
)

from ys.errors import DaemonUnavailable, NotFound, VersionConflict
from ys.store.sqlite import SqliteStore

pytestmark = pytest.mark.e2e


def _cli_has_store(daemon: DaemonHandle) -> bool:
    return daemon.ys("store", "--help").returncode == 0


@pytest.mark.parametrize("via", ["api", "cli"])
def test_an_approval_wakes_the_waiting_execution_once_and_it_completes_with_the_value(
    shared_daemon: DaemonHandle, via: str
) -> None:
    daemon = shared_daemon
    if via == "cli" and not _cli_has_store(daemon):
        pytest.skip("`ys store` is not in the command line yet")
    key = KEY if via == "api" else "approve/order-42-cli"
    c = daemon.client()
    eid = c.trigger("approval", {"key": key}, execution_id=f"approval-{via}")["execution_id"]
    wait_until(lambda: suspended_on(c, eid, key), message="the execution suspended on the key")
    assert c.get(eid)["due_at"] is None  # no timeout: only the put can wake it
    assert claimed(c, eid) == 1

    if via == "api":
        out = api_put(daemon, key, True)
        assert out["version"] == 1 and out["woken"] == 1
    else:
        r = daemon.ys("store", "put", key, "true")
        assert r.returncode == 0, r.stderr

    done = c.wait(eid, timeout=30)
    assert done["status"] == "completed"
    assert done["outcome"]["result"] == {"approved": True}
    assert claimed(c, eid) == 2  # woken exactly once
    assert waiting_on(c, eid) == []
    got = api_get(daemon, key)
    assert got["value"] is True and got["version"] == 1

    # compare-and-set over the API: a stale version is refused and changes nothing
    with pytest.raises(VersionConflict):
        api_put(daemon, key, False, expected_version=0)
    assert api_get(daemon, key)["version"] == 1 and api_get(daemon, key)["value"] is True
    assert api_put(daemon, key, False, expected_version=1)["version"] == 2
    assert claimed(c, eid) == 2  # a completed execution is not woken again


def test_a_put_before_the_wait_completes_without_suspending(shared_daemon: DaemonHandle) -> None:
    daemon = shared_daemon
    key = "approve/order-early"
    assert api_put(daemon, key, {"by": "ana"})["woken"] == 0
    c = daemon.client()
    eid = c.trigger("approval", {"key": key}, execution_id="approval-early")["execution_id"]

    done = c.wait(eid, timeout=30)
    assert done["outcome"]["result"] == {"approved": {"by": "ana"}}
    assert claimed(c, eid) == 1
    kinds = [e["kind"] for e in c.history(eid, limit=1000)["events"]]
    assert "suspended" not in kinds


def test_a_timeout_fails_the_waiting_execution_with_wait_timeout(
    shared_daemon: DaemonHandle,
) -> None:
    c = shared_daemon.client()
    eid = c.trigger(
        "approval", {"key": "approve/never", "timeout": 0.5}, execution_id="approval-timeout"
    )["execution_id"]
    done = c.wait(eid, timeout=30)
    assert done["status"] == "failed"
    assert done["outcome"]["error"]["name"] == "WaitTimeout"
    assert waiting_on(c, eid) == []


def test_two_puts_while_suspended_give_one_delivery(own_daemon: DaemonHandle) -> None:
    daemon = own_daemon.start()
    c = daemon.client()
    eid = c.trigger("approval", {"key": KEY}, execution_id="order-42")["execution_id"]
    wait_until(lambda: suspended_on(c, eid, KEY), message="the execution suspended on the key")
    daemon.stop()  # graceful: nothing is running, the execution stays suspended

    # Both puts land before any daemon can deliver: their wakes must merge.
    store = SqliteStore(daemon.db)
    try:
        assert store.value_put(KEY, "first").woken == 1
        assert store.value_put(KEY, "second").woken == 0
    finally:
        store.close()

    daemon.start()
    c = daemon.client()
    done = c.wait(eid, timeout=30)
    assert done["outcome"]["result"] == {"approved": "second"}
    assert claimed(c, eid) == 2  # one delivery for both puts


def _crashing(home: DaemonHandle, tmp_path: Path, spec: str) -> DaemonHandle:
    """Start the daemon with a crash point in its store commits (see CRASH_SITECUSTOMIZE)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CRASH_SITECUSTOMIZE)
    home.env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), home.env.get("PYTHONPATH", "")) if p
    )
    home.env["YS_TEST_KV_CRASH"] = spec
    return home.start()


def _restart_without_crash_points(home: DaemonHandle) -> DaemonHandle:
    home.env.pop("YS_TEST_KV_CRASH")
    home.env.pop("PYTHONPATH")
    return home.start()


def _put_kills_the_daemon(daemon: DaemonHandle, key: str) -> None:
    assert daemon.proc is not None
    with pytest.raises(DaemonUnavailable):
        api_put(daemon, key, {"approved": True})
    assert daemon.proc.wait(timeout=20) == -9


def _state(db: Path, ids: list[str]) -> tuple[list[tuple[object, ...]], list[object], int]:
    """(kv rows, the waiters' due times, how many waiter registrations remain), read directly
    from the file while no daemon runs."""
    conn = sqlite3.connect(str(db))
    try:
        kv = conn.execute("SELECT key, version, deleted FROM kv").fetchall()
        due = [
            conn.execute("SELECT due_at FROM executions WHERE execution_id=?", (eid,)).fetchone()[0]
            for eid in ids
        ]
        registered = conn.execute("SELECT COUNT(*) FROM kv_waiters").fetchone()[0]
        return kv, due, registered
    finally:
        conn.close()


def _suspend_three(daemon: DaemonHandle) -> list[str]:
    c = daemon.client()
    ids = [
        c.trigger("approval", {"key": KEY}, execution_id=f"order-42-{i}")["execution_id"]
        for i in range(3)
    ]
    for eid in ids:
        wait_until(lambda eid=eid: suspended_on(c, eid, KEY), message=f"{eid} suspended")
    return ids


def test_a_daemon_killed_inside_a_put_commit_keeps_neither_the_value_nor_any_wake(
    own_daemon: DaemonHandle, tmp_path: Path
) -> None:
    daemon = _crashing(own_daemon, tmp_path, "waiter:2")  # dies at the 2nd waiter's wake
    ids = _suspend_three(daemon)

    _put_kills_the_daemon(daemon, KEY)

    kv, due, registered = _state(daemon.db, ids)
    assert kv == [] and due == [None, None, None] and registered == 3  # nothing at all

    _restart_without_crash_points(daemon)
    c = daemon.client()
    with pytest.raises(NotFound):
        api_get(daemon, KEY)
    for eid in ids:
        assert suspended_on(c, eid, KEY) and c.get(eid)["due_at"] is None
        assert claimed(c, eid) == 1
    out = api_put(daemon, KEY, {"approved": True})  # the put is made again: all are woken
    assert out["version"] == 1 and out["woken"] == 3
    for eid in ids:
        done = c.wait(eid, timeout=30)
        assert done["outcome"]["result"] == {"approved": {"approved": True}}
        assert claimed(c, eid) == 2


def test_a_daemon_killed_right_after_a_put_commits_delivers_every_woken_execution(
    own_daemon: DaemonHandle, tmp_path: Path
) -> None:
    daemon = _crashing(own_daemon, tmp_path, "after")  # dies after COMMIT, before answering
    ids = _suspend_three(daemon)

    _put_kills_the_daemon(daemon, KEY)

    kv, due, registered = _state(daemon.db, ids)
    assert kv == [(KEY, 1, 0)] and registered == 0
    assert all(d is not None for d in due)  # every wake committed with the value

    _restart_without_crash_points(daemon)
    c = daemon.client()
    for eid in ids:
        done = c.wait(eid, timeout=30)
        assert done["status"] == "completed"
        assert done["outcome"]["result"] == {"approved": {"approved": True}}
        assert claimed(c, eid) == 2  # no lost wake, no extra delivery
    assert api_get(daemon, KEY)["version"] == 1
