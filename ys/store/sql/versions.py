"""Script versions in the store (docs/design.md, "Workflow options"): which version of each workflow's script
the daemons see now (`scripts`, with whether it is pinned), read by admissions (the record's
`script_sha256`) and claims (the version a delivery runs); which versions live executions
still need (what `ys gc` keeps of the copies under <data>/scripts/); how many live executions
were admitted under an older version than the current one (`ys workflows`).

With many daemons on one database, each records the version it loaded; the same scripts are
deployed on each box, so they agree, and the last one written is the current one."""

from __future__ import annotations

import json
from typing import Any

from ys.store.base import ScriptOptions
from ys.store.records import Record

LIVE = "('admitted', 'running', 'suspended')"


def current_script(c: Any, workflow: str) -> tuple[str | None, bool]:
    """(SHA-256, pinned) of the workflow's script as last recorded; (None, False) for a
    workflow no daemon has seen (its executions wait for it)."""
    row = c.execute("SELECT sha256, pin FROM scripts WHERE workflow=?", (workflow,)).fetchone()
    return (row[0], bool(row[1])) if row else (None, False)


def pinned_script(record: Record, current: str | None, pin: bool) -> tuple[str | None, bool]:
    """(The version a delivery runs, whether it is pinned), given the workflow's current
    script and whether it is pinned: a pinned workflow's execution runs the one recorded at
    its admission (if it has one), any other the current one."""
    if pin and record.script_sha256 is not None:
        return record.script_sha256, True
    return current, False


def set_script_tx(
    c: Any,
    workflow: str,
    sha256: str,
    pin: bool,
    now: float,
    timeout: float | None = None,
    options: ScriptOptions | None = None,
) -> None:
    """Record the workflow's current version, whether it is pinned, its timeout (which
    every later admission's deadline counts from: migration 12's trigger) and the options
    every daemon's claims and lease sweeps apply (`ScriptOptions`: one limit, one cap,
    whichever box's copy of the script a daemon loaded)."""
    o = options or ScriptOptions()
    c.execute(
        "INSERT INTO scripts (workflow, sha256, pin, updated_at, timeout, concurrency, "
        "concurrency_key, max_attempts, on_failure) VALUES (?,?,?,?,?,?,?,?,?) "
        "ON CONFLICT (workflow) DO UPDATE SET sha256=excluded.sha256, pin=excluded.pin, "
        "updated_at=excluded.updated_at, timeout=excluded.timeout, "
        "concurrency=excluded.concurrency, concurrency_key=excluded.concurrency_key, "
        "max_attempts=excluded.max_attempts, on_failure=excluded.on_failure",
        (workflow, sha256, pin, now, timeout, o.concurrency, o.key, o.max_attempts, o.on_failure),
    )


def attempts_cap(c: Any, workflow: str) -> tuple[int | None, str | None]:
    """The workflow's recorded `max_attempts` and failure handler (None: none recorded)."""
    row = c.execute(
        "SELECT max_attempts, on_failure FROM scripts WHERE workflow=?", (workflow,)
    ).fetchone()
    return (None, None) if row is None else (row[0], row[1])


def needed(c: Any) -> set[str]:
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
    out = {r[0] for r in rows}
    out |= {s for (data,) in running if (s := json.loads(data).get("script_sha256"))}
    return out


def stale(c: Any) -> dict[str, int]:
    """Live executions admitted under another version than their workflow's current one."""
    return {
        w: int(n)
        for w, n in c.execute(
            f"SELECT x.workflow, COUNT(*) FROM executions x JOIN scripts s ON s.workflow = "
            f"x.workflow WHERE x.status IN {LIVE} AND x.script_sha256 IS NOT NULL "
            "AND x.script_sha256 <> s.sha256 GROUP BY x.workflow"
        ).fetchall()
    }


# Executions that wait for their workflow's script (docs/design.md, "Workflow options"): not running, and their
# last event is the release of a delivery that found the script broken or missing.
def _waits_for_script(c: Any) -> str:
    reason = c.dialect.json_text("e.data", "reason")
    return (
        "SELECT x.execution_id, e.data FROM executions x JOIN events e "
        "ON e.execution_id = x.execution_id AND e.seq = x.history_length "
        "WHERE x.status IN ('admitted', 'suspended') AND x.lease_token IS NULL "
        f"AND e.kind = 'released' AND {reason} = 'workflow_unavailable'"
    )


def script_waits(c: Any, execution_ids: list[str]) -> dict[str, str]:
    """Which of these executions wait for their script, each with why (its release's detail)."""
    if not execution_ids:
        return {}
    marks = ",".join("?" * len(execution_ids))
    rows = c.execute(
        f"{_waits_for_script(c)} AND x.execution_id IN ({marks})", list(execution_ids)
    ).fetchall()
    return {r[0]: str(json.loads(r[1]).get("detail") or "") for r in rows}


def waiting_for_script(c: Any, workflow: str, now: float) -> list[str]:
    """The executions of `workflow` that wait for its script and are not due by `now`; rows
    another writer holds are left to it (it is changing them anyway)."""
    lock = " FOR UPDATE OF x SKIP LOCKED" if c.dialect.skip_locked else ""
    rows = c.execute(
        f"{_waits_for_script(c)} AND x.workflow = ? AND (x.due_at IS NULL OR x.due_at > ?)" + lock,
        (workflow, now),
    ).fetchall()
    return [r[0] for r in rows]


def count_script_waits(c: Any) -> int:
    """How many executions wait for their script (`ys_script_waiting_executions`)."""
    (n,) = c.execute(f"SELECT COUNT(*) FROM ({_waits_for_script(c)}) w").fetchone()
    return int(n)
