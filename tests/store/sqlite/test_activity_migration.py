"""The SQLite adapter's last migration (the pictures' rollups, ys/store/sql/charts.py): a
database whose executions ran before it gets the last two days of activity counted from its
executions, and the triggers keep counting after it."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ys.outcomes import outcome_of
from ys.store.sqlite import SqliteStore


def undo_activity(conn: sqlite3.Connection) -> None:
    """Back to the schema before the pictures' migration (its version row deleted by the
    caller)."""
    for trigger in ("activity_insert", "activity_ended"):
        conn.execute(f"DROP TRIGGER {trigger}")
    for table in ("activity", "workflow_activity", "delivery_durations"):
        conn.execute(f"DROP TABLE {table}")


def undo_failed_at(conn: sqlite3.Connection) -> None:
    """Back to the schema before migration 21 (recent failures by `failed_at`)."""
    conn.execute("DROP INDEX executions_failed")
    conn.execute("ALTER TABLE executions DROP COLUMN failed_at")
    conn.execute("CREATE INDEX executions_failed ON executions(updated_at) WHERE status = 'failed'")


def undo_limits(conn: sqlite3.Connection) -> None:
    """Back to the schema before migration 20 (limits and attempts across daemons)."""
    conn.execute("DROP INDEX executions_slot_held")
    for table, column in (
        ("scripts", "concurrency"),
        ("scripts", "concurrency_key"),
        ("scripts", "max_attempts"),
        ("scripts", "on_failure"),
        ("executions", "slot_held_until"),
        ("executions", "step_deadline_at"),
        ("executions", "step_deadline"),
    ):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")


def test_the_migration_counts_the_last_two_days_from_the_executions(tmp_path: Path):
    path = tmp_path / "ys.db"
    now = time.time()
    hour = now - now % 3600
    store = SqliteStore(path)
    store.admit("wf", execution_id="old", now=hour - 3 * 86400)  # before the two days
    store.cancel("old", now=hour - 3 * 86400, at_once=True)
    store.admit("wf", execution_id="done", now=hour - 3600)
    (d,) = store.claim_due(now=hour - 60, limit=1, lease_seconds=300)
    store.acknowledge(
        d.execution_id, d.token, outcome_of({"status": "completed", "result": 1}), now=hour - 30
    )
    store.admit("wf", execution_id="bad", now=hour + 10)
    (d,) = store.claim_due(now=hour + 20, limit=1, lease_seconds=300)
    failed = {"status": "failed", "error": {"name": "E"}}
    store.acknowledge(d.execution_id, d.token, outcome_of(failed), now=hour + 50)
    store.close()
    conn = sqlite3.connect(path)
    with conn:
        undo_failed_at(conn)  # migrations 20 and 21, made again too
        undo_limits(conn)
        undo_activity(conn)
        conn.execute("DELETE FROM schema_migrations WHERE version >= 19")  # the pictures' on
    conn.close()
    store = SqliteStore(path)
    try:
        day = store.activity(hour - 3600, hour + 3600, 3600)
        assert [(b.started, b.completed, b.failed) for b in day] == [(1, 1, 0), (1, 0, 1)]
        assert sum(b.started for b in store.activity(hour - 4 * 86400, hour, 3600)) == 1
        # migration 21: a failure made before it is found by when it failed
        assert [r.execution_id for r in store.failed_since(hour)] == ["bad"]
        assert store.failed_since(hour + 51) == []
        store.admit("wf", execution_id="new", now=hour + 70)  # the triggers count from here
        assert store.activity(hour, hour + 3600, 3600)[0].started == 2
        of_wf = store.activity(hour - 3600, hour + 3600, 3600, workflow="wf")
        assert [(b.started, b.completed, b.failed) for b in of_wf] == [
            (1, 1, 0),
            (2, 0, 1),
        ]
    finally:
        store.close()
