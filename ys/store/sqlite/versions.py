"""Script versions in the store (DESIGN.md §7): which version of each workflow's script the
daemon sees now (`scripts`, with whether it is pinned), read by admissions (the record's
`script_sha256`) and claims (the version a delivery runs); which versions live executions
still need (what `ys gc` keeps of the copies under <data>/scripts/); how many live executions
were admitted under an older version than the current one (`ys workflows`)."""

from __future__ import annotations

import sqlite3

LIVE = "('admitted', 'running', 'suspended')"


def current_script(c: sqlite3.Connection, workflow: str) -> tuple[str | None, bool]:
    """(SHA-256, pinned) of the workflow's script as the daemon last saw it; (None, False)
    for a workflow it has not seen (its executions wait for it)."""
    row = c.execute("SELECT sha256, pin FROM scripts WHERE workflow=?", (workflow,)).fetchone()
    return (row[0], bool(row[1])) if row else (None, False)


def delivery_script(
    c: sqlite3.Connection, execution_id: str, workflow: str
) -> tuple[str | None, bool]:
    """(The version a delivery runs, whether it is pinned): a pinned workflow's execution runs
    the one recorded at its admission (if it has one), any other the current one."""
    current, pin = current_script(c, workflow)
    if pin:
        row = c.execute(
            "SELECT script_sha256 FROM executions WHERE execution_id=?", (execution_id,)
        ).fetchone()
        if row is not None and row[0] is not None:
            return str(row[0]), True
    return current, False


def set_script_tx(
    c: sqlite3.Connection,
    workflow: str,
    sha256: str,
    pin: bool,
    now: float,
    timeout: float | None = None,
) -> None:
    """Record the workflow's current version, whether it is pinned and its timeout (which
    every later admission's deadline counts from: migration 12's trigger)."""
    c.execute(
        "INSERT INTO scripts (workflow, sha256, pin, updated_at, timeout) VALUES (?,?,?,?,?) "
        "ON CONFLICT (workflow) DO UPDATE SET sha256=excluded.sha256, pin=excluded.pin, "
        "updated_at=excluded.updated_at, timeout=excluded.timeout",
        (workflow, sha256, int(pin), now, timeout),
    )


def needed(c: sqlite3.Connection) -> set[str]:
    """Every version a live execution was admitted under or runs now, and each current one."""
    rows = c.execute(
        f"SELECT script_sha256 FROM executions WHERE status IN {LIVE} "
        "AND script_sha256 IS NOT NULL UNION SELECT sha256 FROM scripts"
    ).fetchall()
    running = c.execute(
        "SELECT e.data FROM executions x JOIN events e ON e.execution_id = x.execution_id "
        "AND e.seq = (SELECT MAX(seq) FROM events WHERE execution_id = x.execution_id "
        "AND kind = 'claimed') WHERE x.status = 'running'"
    ).fetchall()
    import json

    out = {r[0] for r in rows}
    out |= {s for (data,) in running if (s := json.loads(data).get("script_sha256"))}
    return out


def stale(c: sqlite3.Connection) -> dict[str, int]:
    """Live executions admitted under another version than their workflow's current one."""
    return dict(
        c.execute(
            f"SELECT x.workflow, COUNT(*) FROM executions x JOIN scripts s ON s.workflow = "
            f"x.workflow WHERE x.status IN {LIVE} AND x.script_sha256 IS NOT NULL "
            "AND x.script_sha256 <> s.sha256 GROUP BY x.workflow"
        ).fetchall()
    )


# Executions that wait for their workflow's script (docs/design.md §2): not running, and their
# last event is the release of a delivery that found the script broken or missing.
WAITS_FOR_SCRIPT = (
    "SELECT x.execution_id, e.data FROM executions x JOIN events e "
    "ON e.execution_id = x.execution_id AND e.seq = x.history_length "
    "WHERE x.status IN ('admitted', 'suspended') AND x.lease_token IS NULL "
    "AND e.kind = 'released' AND json_extract(e.data, '$.reason') = 'workflow_unavailable'"
)


def script_waits(c: sqlite3.Connection, execution_ids: list[str]) -> dict[str, str]:
    """Which of these executions wait for their script, each with why (its release's detail)."""
    if not execution_ids:
        return {}
    import json

    marks = ",".join("?" * len(execution_ids))
    rows = c.execute(
        f"{WAITS_FOR_SCRIPT} AND x.execution_id IN ({marks})", execution_ids
    ).fetchall()
    return {r[0]: str(json.loads(r[1]).get("detail") or "") for r in rows}


def waiting_for_script(c: sqlite3.Connection, workflow: str, now: float) -> list[str]:
    """The executions of `workflow` that wait for its script and are not due by `now`."""
    rows = c.execute(
        f"{WAITS_FOR_SCRIPT} AND x.workflow = ? AND (x.due_at IS NULL OR x.due_at > ?)",
        (workflow, now),
    ).fetchall()
    return [r[0] for r in rows]


def count_script_waits(c: sqlite3.Connection) -> int:
    """How many executions wait for their script (`ys_script_waiting_executions`)."""
    (n,) = c.execute(f"SELECT COUNT(*) FROM ({WAITS_FOR_SCRIPT})").fetchone()
    return int(n)
