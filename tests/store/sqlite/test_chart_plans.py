"""The pictures' reads (ys/store/sql/charts.py) walk indexes only on SQLite: EXPLAIN QUERY
PLAN searches an index for every read of `executions` and `schedule_slots`, never scans."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from ys.store.sql import charts
from ys.store.sqlite.dialect import Connection
from ys.store.sqlite.schema import migrate


def _conn() -> Any:
    c = sqlite3.connect(":memory:", factory=Connection)
    migrate(c)
    return c


@pytest.mark.parametrize(
    "read",
    [
        lambda c: (charts.activity_sql(c, False), charts.activity_args(0, 86400, 600, None)),
        lambda c: (charts.activity_sql(c, True), charts.activity_args(0, 86400, 600, "wf")),
        lambda c: (charts.SCHEDULE_HISTORY, ("nightly", 50)),
    ],
    ids=["activity", "activity-of-a-workflow", "schedule-history"],
)
def test_each_read_searches_an_index(read: Any):
    c = _conn()
    sql, args = read(c)
    plan = [r[3] for r in c.execute("EXPLAIN QUERY PLAN " + sql, args)]
    touched = [p for p in plan if " executions" in p or "schedule_slots" in p or " s " in p]
    assert touched and all(p.startswith("SEARCH") for p in touched), plan
    assert not any(p.startswith("SCAN executions") for p in plan), plan
    completed = [p for p in plan if "executions_completed" in p]
    assert not completed or all("COVERING" in p for p in completed), plan
