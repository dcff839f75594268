"""The pictures' reads (ys/store/sql/charts.py) walk primary keys and indexes only on SQLite:
EXPLAIN QUERY PLAN searches for every table they read, never scans one, and the activity
and durations reads touch only their rollups (never `executions`)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from ys.store.sql import charts
from ys.store.sqlite.dialect import Connection
from ys.store.sqlite.schema import migrate

DAY = (29_000_000, 144, 29_000_000, 29_001_440)  # minute arguments: since, bucket, since, until


@pytest.mark.parametrize(
    "sql,args,tables",
    [
        (charts.activity_sql(False, False), DAY, {"activity"}),
        (charts.activity_sql(False, True), (*DAY, "wf"), {"workflow_activity"}),
        (charts.activity_sql(True, False), DAY, {"workflow_activity"}),
        (charts.DURATIONS, (480_000, 480_024), {"delivery_durations"}),
        (charts.SCHEDULE_HISTORY, ("nightly", 50), {"schedule_slots", "executions"}),
    ],
    ids=["activity", "activity-of-a-workflow", "activity-by-workflow", "durations", "schedule"],
)
def test_each_read_searches_a_key(sql: str, args: tuple[Any, ...], tables: set[str]):
    c = sqlite3.connect(":memory:", factory=Connection)
    migrate(c)
    plan = [r[3] for r in c.execute("EXPLAIN QUERY PLAN " + sql, args)]
    reads = [p for p in plan if p.startswith(("SEARCH", "SCAN"))]
    assert reads and all(p.startswith("SEARCH") for p in reads), plan
    assert {p.split()[1] for p in reads} <= tables | {"s", "x"}, plan
