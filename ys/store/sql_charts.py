"""The dashboard's pictures' reads, written once for both adapters (`?` placeholders; the
PostgreSQL adapter turns them into `%s` with `pg`): executions started, completed and failed
per time bucket, and what each of a schedule's recent slots came to with its execution.

Each statement walks indexes only, a bounded number of times: a bucket's three counts are
three index ranges (started: `executions_admitted`, or `executions_workflow` for one
workflow; completed: `executions_completed`; failed: `executions_failed`), and the buckets
are made by a recursive CTE, so the SQL needs no engine's date or rounding functions.
"""

from __future__ import annotations

from typing import Any

MAX_BUCKETS = 1000


def _counts(workflow: bool, hints: bool) -> str:
    """`hints`: name the partial indexes (SQLite's INDEXED BY; its planner, without
    statistics, would rather walk every completed execution by `executions_status`)."""
    wf = " AND workflow = ?" if workflow else ""
    completed = " INDEXED BY executions_completed" if hints else ""
    failed = " INDEXED BY executions_failed" if hints else ""
    return (
        "WITH RECURSIVE b(t) AS (SELECT CAST(? AS DOUBLE PRECISION) UNION ALL "
        "SELECT t + ? FROM b WHERE t + ? < ?) SELECT t, "
        f"(SELECT COUNT(*) FROM executions WHERE admitted_at >= t AND admitted_at < t + ?{wf}), "
        f"(SELECT COUNT(*) FROM executions{completed} WHERE status = 'completed' "
        f"AND updated_at >= t AND updated_at < t + ?{wf}), "
        f"(SELECT COUNT(*) FROM executions{failed} WHERE status = 'failed' "
        f"AND updated_at >= t AND updated_at < t + ?{wf}) FROM b ORDER BY t"
    )


# [hints][workflow]: the statement for SQLite (hints) or PostgreSQL, of all or one workflow
ACTIVITY = {h: {w: _counts(w, h) for w in (False, True)} for h in (False, True)}

SCHEDULE_HISTORY = (
    "SELECT s.slot, s.outcome, s.why, s.execution_id, s.at, s.count, x.status, x.admitted_at "
    "FROM schedule_slots s LEFT JOIN executions x ON x.execution_id = s.execution_id "
    "WHERE s.name = ? ORDER BY s.slot DESC LIMIT ?"
)


def pg(sql: str) -> str:
    """A statement of this module in PostgreSQL's placeholders."""
    return sql.replace("?", "%s")


def activity_args(
    since: float, until: float, bucket: float, workflow: str | None, hints: bool
) -> tuple[str, tuple[Any, ...]]:
    """The statement and its arguments: buckets of `bucket` seconds from `since` up to
    `until` (at most MAX_BUCKETS)."""
    if bucket <= 0 or until <= since or (until - since) / bucket > MAX_BUCKETS:
        raise ValueError("activity: at most 1000 buckets of a positive length")
    s, b, u = float(since), float(bucket), float(until)
    if workflow is None:
        return ACTIVITY[hints][False], (s, b, b, u, b, b, b)
    return ACTIVITY[hints][True], (s, b, b, u, b, workflow, b, workflow, b, workflow)


def activity_rows(rows: list[Any]) -> list[dict[str, Any]]:
    return [
        {"start": float(r[0]), "started": int(r[1]), "completed": int(r[2]), "failed": int(r[3])}
        for r in rows
    ]


def history_rows(rows: list[Any]) -> list[dict[str, Any]]:
    """Slots newest first, each with `mark` (fired, late, skipped, queued, missed, or failed:
    it fired and its execution failed) and `lateness` (its admission after its slot)."""
    out = []
    for slot, outcome, why, xid, at, count, status, admitted in rows:
        mark = "failed" if outcome in ("fired", "late") and status == "failed" else outcome
        out.append(
            {
                "slot": float(slot),
                "outcome": outcome,
                "mark": mark,
                "why": why,
                "execution_id": xid,
                "status": status,
                "at": float(at),
                "count": int(count),
                "lateness": None if admitted is None else max(0.0, float(admitted) - float(slot)),
            }
        )
    return out
