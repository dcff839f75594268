"""The dashboard's pictures' reads and the rollups behind them: executions started, completed
and failed per time bucket, how long deliveries took per hour, and what each of a schedule's
recent slots came to with its execution.

A chart's read costs the same with a million executions as with ten: it reads rollups kept in
the transaction of every write, never the executions. `activity` holds the counts per minute
(a day is at most 1440 rows, however many workflows), `workflow_activity` per workflow and
10 minutes (a day is 144 rows a workflow); the adapters' triggers keep both, as they keep
`execution_counts`. Each read sums its rows into buckets by one grouped statement over the
table's primary key. `delivery_durations` holds, per hour, how many deliveries took how long, in log-scale
buckets (QUARTERS per doubling, from a millisecond): `record_delivery` adds one in the
transaction that ends a delivery, and `durations` reads a day's 24 hours of them, each
quantile the middle of its bucket (within 9% of the true value).
"""

from __future__ import annotations

import math
from typing import Any

from ys.store.reading import ActivityBucket, HourDurations, SlotHistory

MAX_BUCKETS = 1000
QUARTERS = 4  # buckets per doubling of a delivery's duration
KEEP = 2 * 86400.0  # the rollups' rows are kept at least this long (a day's chart, and a margin)


def _minutes(since: float, until: float, bucket: float, unit: int) -> tuple[int, int, int]:
    """`since`, `until` and `bucket` in minutes, each a whole `unit` of seconds (60 for
    `activity`, 600 for `workflow_activity`); ValueError for anything else."""
    if bucket <= 0 or until <= since or (until - since) / bucket > MAX_BUCKETS:
        raise ValueError("activity: at most 1000 buckets of a positive length")
    if any(v % unit for v in (since, until, bucket)):
        what = "whole minutes" if unit == 60 else "whole 10 minutes for a workflow"
        raise ValueError(f"activity: {what} only (since, until and bucket)")
    return int(since // 60), int(until // 60), int(bucket // 60)


def activity_sql(by_workflow: bool, one: bool) -> str:
    """Counts per bucket from a rollup: of all workflows from `activity` (per minute), per
    workflow (`by_workflow`) or of one (`one`) from `workflow_activity` (per 10 minutes).
    Integer division makes the buckets on both engines."""
    wf = "workflow, " if by_workflow else ""
    table = "workflow_activity" if by_workflow or one else "activity"
    return (
        f"SELECT {wf}(minute - ?) / ? AS b, SUM(started), SUM(completed), SUM(failed) "
        f"FROM {table} WHERE minute >= ? AND minute < ?"
        + (" AND workflow = ?" if one else "")
        + f" GROUP BY {wf}b ORDER BY {wf}b"
    )


def _filled(since: float, bucket: float, n: int, rows: list[Any]) -> list[ActivityBucket]:
    """Every bucket, oldest first, zeros where no row is."""
    out = [ActivityBucket(since + i * bucket) for i in range(n)]
    for b, started, completed, failed in rows:
        out[int(b)] = ActivityBucket(out[int(b)].start, int(started), int(completed), int(failed))
    return out


def activity(
    c: Any, since: float, until: float, bucket: float, workflow: str | None = None
) -> list[ActivityBucket]:
    s, u, b = _minutes(since, until, bucket, 60 if workflow is None else 600)
    args: tuple[Any, ...] = (s, b, s, u) + ((workflow,) if workflow is not None else ())
    rows = c.execute(activity_sql(False, workflow is not None), args).fetchall()
    return _filled(since, bucket, -(-(u - s) // b), rows)


def activity_by_workflow(
    c: Any, since: float, until: float, bucket: float
) -> dict[str, list[ActivityBucket]]:
    """Each workflow's buckets that saw anything, in one grouped read."""
    s, u, b = _minutes(since, until, bucket, 600)
    n = -(-(u - s) // b)
    grouped: dict[str, list[Any]] = {}
    for wf, *row in c.execute(activity_sql(True, False), (s, b, s, u)).fetchall():
        grouped.setdefault(wf, []).append(row)
    return {wf: _filled(since, bucket, n, rows) for wf, rows in grouped.items()}


def duration_bucket(seconds: float) -> int:
    """The log-scale bucket of a duration: 0 up to a millisecond, then QUARTERS per doubling."""
    ms = seconds * 1000
    return 0 if ms <= 1 else int(math.floor(math.log2(ms) * QUARTERS))


def bucket_middle(k: int) -> float:
    """A bucket's duration in seconds: the geometric middle of its bounds."""
    return 0.001 if k <= 0 else 2 ** ((k + 0.5) / QUARTERS) / 1000


RECORD_DELIVERY = (
    "INSERT INTO delivery_durations (hour, bucket, n) VALUES (?,?,1) "
    "ON CONFLICT (hour, bucket) DO UPDATE SET n = delivery_durations.n + 1"
)


def record_delivery(c: Any, execution_id: str, ended: float) -> None:
    """Count the delivery of `execution_id` that ends at `ended` (inside the transaction that
    ends it): from its last `claimed` event, read backwards along the events' primary key."""
    row = c.execute(
        "SELECT at FROM events WHERE execution_id = ? AND kind = 'claimed' "
        "ORDER BY seq DESC LIMIT 1",
        (execution_id,),
    ).fetchone()
    record_delivered(c, ended, None if row is None else row[0])


def record_delivered(c: Any, ended: float, claimed_at: float | None) -> None:
    """`record_delivery` for a caller that read when the delivery was claimed (None: never)."""
    if claimed_at is not None:
        c.execute(RECORD_DELIVERY, (int(ended // 3600), duration_bucket(ended - claimed_at)))


DURATIONS = (
    "SELECT hour, bucket, n FROM delivery_durations WHERE hour >= ? AND hour < ? "
    "ORDER BY hour, bucket"
)


def quantile(counts: list[tuple[int, int]], q: float) -> float:
    """The `q` quantile of a histogram [(bucket, n)] in bucket order (n > 0 somewhere)."""
    total = sum(n for _, n in counts)
    rank = q * total
    seen = 0
    for k, n in counts:
        seen += n
        if seen >= rank:
            return bucket_middle(k)
    return bucket_middle(counts[-1][0])


def durations(c: Any, since: float, until: float) -> list[HourDurations]:
    """Deliveries that ended in each hour from `since` to `until` (whole hours, at most a
    week), oldest first, the quantiles in seconds (None for
    an hour without deliveries)."""
    if until <= since or since % 3600 or until % 3600 or until - since > 7 * 86400:
        raise ValueError("durations: whole hours, at most a week")
    first, last = int(since // 3600), int(until // 3600)
    hours: dict[int, list[tuple[int, int]]] = {}
    for hour, k, n in c.execute(DURATIONS, (first, last)).fetchall():
        if n > 0:
            hours.setdefault(int(hour), []).append((int(k), int(n)))
    out = []
    for h in range(first, last):
        counts = hours.get(h)
        out.append(
            HourDurations(
                h * 3600.0,
                sum(n for _, n in counts) if counts else 0,
                quantile(counts, 0.5) if counts else None,
                quantile(counts, 0.95) if counts else None,
            )
        )
    return out


def prune_tx(c: Any, cutoff: float) -> None:
    """Drop the rollups' rows older than `cutoff` (gc, after the executions)."""
    c.execute("DELETE FROM activity WHERE minute < ?", (int(cutoff // 60),))
    c.execute("DELETE FROM workflow_activity WHERE minute < ?", (int(cutoff // 60),))
    c.execute("DELETE FROM delivery_durations WHERE hour < ?", (int(cutoff // 3600),))


SCHEDULE_HISTORY = (
    "SELECT s.slot, s.outcome, s.why, s.execution_id, s.at, s.count, x.status, x.admitted_at "
    "FROM schedule_slots s LEFT JOIN executions x ON x.execution_id = s.execution_id "
    "WHERE s.name = ? ORDER BY s.slot DESC LIMIT ?"
)


def schedule_history(c: Any, name: str, limit: int = 50) -> list[SlotHistory]:
    """Slots newest first, each with `mark` (fired, late, skipped, queued, missed, or failed:
    it fired and its execution failed) and `lateness` (its admission after its slot)."""
    out = []
    for slot, outcome, why, xid, at, count, status, admitted in c.execute(
        SCHEDULE_HISTORY, (name, limit)
    ).fetchall():
        mark = "failed" if outcome in ("fired", "late") and status == "failed" else outcome
        out.append(
            SlotHistory(
                slot=float(slot),
                outcome=outcome,
                mark=mark,
                why=why,
                execution_id=xid,
                status=status,
                at=float(at),
                count=int(count),
                lateness=None if admitted is None else max(0.0, float(admitted) - float(slot)),
            )
        )
    return out
