"""The dashboard's pictures' reads: executions started, completed and failed per time bucket,
and what each of a schedule's recent slots came to with its execution.

Each statement walks indexes only, a bounded number of times: a bucket's three counts are
three index ranges (started: `executions_admitted`, or `executions_workflow` for one
workflow; completed: `executions_completed`; failed: `executions_failed`), and the buckets
are made by a recursive CTE, so the SQL needs no engine's date or rounding functions. Where
the planner needs telling which partial index (SQLite, without statistics, would rather walk
every completed execution by `executions_status`), the dialect names it (`indexed_by`).
"""

from __future__ import annotations

from typing import Any

MAX_BUCKETS = 1000


def activity_sql(c: Any, workflow: bool) -> str:
    """The statement of `activity` on `c`'s engine, of all workflows or of one."""
    wf = " AND workflow = ?" if workflow else ""
    completed = c.dialect.indexed_by("executions_completed")
    failed = c.dialect.indexed_by("executions_failed")
    return (
        "WITH RECURSIVE b(t) AS (SELECT CAST(? AS DOUBLE PRECISION) UNION ALL "
        "SELECT t + ? FROM b WHERE t + ? < ?) SELECT t, "
        f"(SELECT COUNT(*) FROM executions WHERE admitted_at >= t AND admitted_at < t + ?{wf}), "
        f"(SELECT COUNT(*) FROM executions{completed} WHERE status = 'completed' "
        f"AND updated_at >= t AND updated_at < t + ?{wf}), "
        f"(SELECT COUNT(*) FROM executions{failed} WHERE status = 'failed' "
        f"AND updated_at >= t AND updated_at < t + ?{wf}) FROM b ORDER BY t"
    )


def activity_args(
    since: float, until: float, bucket: float, workflow: str | None
) -> tuple[Any, ...]:
    """The arguments of `activity_sql`: buckets of `bucket` seconds from `since` up to
    `until` (at most MAX_BUCKETS)."""
    if bucket <= 0 or until <= since or (until - since) / bucket > MAX_BUCKETS:
        raise ValueError("activity: at most 1000 buckets of a positive length")
    s, b, u = float(since), float(bucket), float(until)
    if workflow is None:
        return (s, b, b, u, b, b, b)
    return (s, b, b, u, b, workflow, b, workflow, b, workflow)


def activity(
    c: Any, since: float, until: float, bucket: float, workflow: str | None = None
) -> list[dict[str, Any]]:
    args = activity_args(since, until, bucket, workflow)
    rows = c.execute(activity_sql(c, workflow is not None), args).fetchall()
    return [
        {"start": float(r[0]), "started": int(r[1]), "completed": int(r[2]), "failed": int(r[3])}
        for r in rows
    ]


SCHEDULE_HISTORY = (
    "SELECT s.slot, s.outcome, s.why, s.execution_id, s.at, s.count, x.status, x.admitted_at "
    "FROM schedule_slots s LEFT JOIN executions x ON x.execution_id = s.execution_id "
    "WHERE s.name = ? ORDER BY s.slot DESC LIMIT ?"
)


def schedule_history(c: Any, name: str, limit: int = 50) -> list[dict[str, Any]]:
    """Slots newest first, each with `mark` (fired, late, skipped, queued, missed, or failed:
    it fired and its execution failed) and `lateness` (its admission after its slot)."""
    out = []
    for slot, outcome, why, xid, at, count, status, admitted in c.execute(
        SCHEDULE_HISTORY, (name, limit)
    ).fetchall():
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
