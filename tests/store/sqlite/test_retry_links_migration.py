"""The SQLite adapter's migration 17 (retries linked both ways): a database whose retries were
made before it gets each original's `retried_by` filled from the retries it holds, the newest
one (later admitted, ties by the greater ID), and then verifies clean."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.store.sqlite.test_activity_migration import undo_activity, undo_failed_at, undo_limits
from tests.store.test_retry_client import T0, failed_at_fourth_step
from ys.store.sqlite import SqliteStore
from ys.store.sqlite.schema import MIGRATIONS


def test_migration_17_links_the_retries_made_before_it(tmp_path: Path):
    path = tmp_path / "ys.db"
    store = SqliteStore(path)
    failed_at_fourth_step(store)
    store.retry("order-7", now=T0 + 10)
    store.retry("order-7", new_id="named", now=T0 + 11)
    store.close()
    assert MIGRATIONS[16].lstrip().startswith("ALTER TABLE executions ADD COLUMN retried_by")
    conn = sqlite3.connect(path)  # back to the schema before migration 17
    with conn:
        conn.execute("DROP INDEX executions_retry_of")
        conn.execute("ALTER TABLE executions DROP COLUMN retried_by")
        conn.execute("DROP TABLE IF EXISTS workflow_pauses")  # migration 18, made again too
        undo_failed_at(conn)  # the migrations after 17 run again too
        undo_limits(conn)
        undo_activity(conn)
        conn.execute("DELETE FROM schema_migrations WHERE version >= 17")
    conn.close()
    store = SqliteStore(path)
    try:
        assert store.get("order-7").retried_by == "named"
        assert store.get("named").retried_by is None
        assert store.verify() == []
    finally:
        store.close()
