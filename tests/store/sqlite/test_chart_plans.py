"""The pictures' reads (ys/store/sql_charts.py) walk indexes only on SQLite: EXPLAIN QUERY
PLAN searches an index for every read of `executions` and `schedule_slots`, never scans."""

from __future__ import annotations

import sqlite3

import pytest

from ys.store import sql_charts
from ys.store.sqlite.schema import migrate


@pytest.mark.parametrize(
    "sql,args",
    [
        sql_charts.activity_args(0, 86400, 600, None, hints=True),
        sql_charts.activity_args(0, 86400, 600, "wf", hints=True),
        (sql_charts.SCHEDULE_HISTORY, ("nightly", 50)),
    ],
    ids=["activity", "activity-of-a-workflow", "schedule-history"],
)
def test_each_read_searches_an_index(sql: str, args: tuple[object, ...]):
    c = sqlite3.connect(":memory:")
    migrate(c)
    plan = [r[3] for r in c.execute("EXPLAIN QUERY PLAN " + sql, args)]
    touched = [p for p in plan if " executions" in p or "schedule_slots" in p or " s " in p]
    assert touched and all(p.startswith("SEARCH") for p in touched), plan
    assert not any(p.startswith("SCAN executions") for p in plan), plan
    completed = [p for p in plan if "executions_completed" in p]
    assert not completed or all("COVERING" in p for p in completed), plan
