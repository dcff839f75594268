"""`ys gc`: finished executions older than the cut-off go, with their logs; executions that
have not finished, recent ones and effect records stay; --dry-run changes nothing.

The old executions are written into the database before the daemon starts, with `now=` forty
days back (housekeeping is kept off them with YS_RETENTION_DAYS)."""

from __future__ import annotations

import os
import time

import pytest
from cron_support import out_json

from ys.outcomes import outcome_of
from ys.paths import resolve
from ys.store.sqlite import SqliteStore

DAY = 86400.0


def settle(store: SqliteStore, outcomes: dict[str, dict | None], at: float) -> None:
    """Deliver what is due at `at`: acknowledge the given outcomes, release the rest."""
    for d in store.claim_due(now=at, limit=100):
        outcome = outcomes.get(d.execution_id)
        if outcome is None:
            store.release(d.execution_id, d.token, retry_at=at, now=at)
        else:
            store.acknowledge(d.execution_id, d.token, outcome_of(outcome), now=at)


@pytest.fixture
def aged(home, monkeypatch):
    home.env["YS_RETENTION_DAYS"] = "3650"
    now = time.time()
    old = now - 40 * DAY
    store = SqliteStore(home.db)
    try:
        for execution_id in ("old-done", "old-failed", "old-waiting", "new-done"):
            at = now - 3600 if execution_id == "new-done" else old
            workflow = "ghost" if execution_id == "old-waiting" else "hello"  # ghost never runs
            store.admit(workflow, {}, execution_id=execution_id, now=at)
        settle(
            store,
            {
                "old-done": {"status": "completed", "result": 1},
                "old-failed": {"status": "failed", "error": {"name": "E", "message": "x"}},
            },
            old + 1,
        )
        settle(store, {"new-done": {"status": "completed", "result": 1}}, now - 3500)
        store.effect_begin(
            "charge.v1", "shop:charge:1", {"amount": 5}, "old-done", "charge", now=old
        )
        store.effect_settle("charge.v1", "shop:charge:1", '{"receipt":"r-1"}', now=old)
    finally:
        store.close()
    os.chmod(home.db, 0o600)
    monkeypatch.setenv("YS_HOME", str(home.home))
    logs = {}
    for execution_id in ("old-done", "new-done"):
        folder = resolve().log_dir(execution_id)
        folder.mkdir(parents=True)
        (folder / "1.log").write_text("printed\n")
        logs[execution_id] = folder
    home.start()
    return home, logs


def ids(daemon) -> set[str]:
    with daemon.client() as c:
        return {r["execution_id"] for r in c.list(limit=1000)["executions"]}


def test_dry_run_changes_nothing(aged):
    daemon, logs = aged
    before = ids(daemon)
    result = out_json(daemon.ys("gc", "--older-than", "30d", "--dry-run", "--json"))
    assert result["dry_run"] is True and result["count"] == 2
    assert sorted(result["pruned"]) == ["old-done", "old-failed"]
    assert ids(daemon) == before and logs["old-done"].is_dir()
    people = daemon.ys("gc", "--older-than", "30d", "--dry-run")
    assert people.stdout == ""  # a count for people, the IDs with --json
    assert "would prune 2 executions finished over 30d ago" in people.stderr
    assert ids(daemon) == before


def test_gc_prunes_old_finished_executions_and_their_logs_only(aged):
    daemon, logs = aged
    result = daemon.ys("gc", "--older-than", "30d")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and "old-done" not in result.stderr  # a count, not every ID
    assert "pruned 2 executions finished over 30d ago and their logs" in result.stderr
    assert ids(daemon) == {"old-waiting", "new-done"}
    assert daemon.ys("get", "old-done", "--json").returncode == 4
    assert not logs["old-done"].exists() and logs["new-done"].is_dir()
    with daemon.client() as c:
        effect = c.effect("shop:charge:1")  # effect records are never pruned
        assert effect["status"] == "settled" and effect["result"] == {"receipt": "r-1"}
        assert c.get("old-waiting")["status"] not in ("completed", "failed", "cancelled")
    again = out_json(daemon.ys("gc", "--older-than", "30d", "--json"))
    assert again == {"pruned": [], "count": 0, "dry_run": False}


def test_a_bad_duration_exits_2(aged):
    daemon, _ = aged
    result = daemon.ys("gc", "--older-than", "a while")
    assert result.returncode == 2 and result.stderr.startswith("INVALID_ARGUMENT: --older-than")


def test_older_than_0_says_every_finished_execution_not_over_0_ago(aged):
    daemon, _ = aged
    result = daemon.ys("gc", "--older-than", "0", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "would prune 3 executions finished;" in result.stderr
    assert " 0 ago" not in result.stderr and "0s ago" not in result.stderr
    assert daemon.ys("gc", "--older-than", "0").stderr.strip() == (
        "pruned 3 executions finished and their logs"
    )
    nothing = daemon.ys("gc", "--older-than", "0")
    assert nothing.stderr.strip() == "nothing to prune: no execution finished"
