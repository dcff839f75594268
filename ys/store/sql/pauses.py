"""Workflow pauses (`ys workflows pause W`), a row per paused workflow in `workflow_pauses`.
A paused workflow's executions are still admitted; no claim takes them (the claims test
`SKIP_PAUSED` in their own transaction, the claim at admission asks with its row: ys.store.sql.
claims.claim_new) until it is
resumed, on any daemon sharing the database (docs/design.md, "Schedules and paused
workflows")."""

from __future__ import annotations

from typing import Any

# Appended to a claim's WHERE over `executions`: its workflow is not paused.
SKIP_PAUSED = (
    "AND NOT EXISTS (SELECT 1 FROM workflow_pauses p WHERE p.workflow = executions.workflow) "
)


def is_paused(c: Any, workflow: str) -> bool:
    return (
        c.execute("SELECT 1 FROM workflow_pauses WHERE workflow=?", (workflow,)).fetchone()
        is not None
    )


def pause_tx(c: Any, workflow: str, paused: bool, now: float) -> bool:
    """Pause (or resume) `workflow`; whether it was paused before."""
    was = is_paused(c, workflow)
    if paused:
        c.execute(
            "INSERT INTO workflow_pauses (workflow, paused_at) VALUES (?, ?) "
            "ON CONFLICT (workflow) DO NOTHING",
            (workflow, now),
        )
    else:
        c.execute("DELETE FROM workflow_pauses WHERE workflow=?", (workflow,))
    return was


def paused(c: Any) -> dict[str, float]:
    """The paused workflows, each with when it was paused."""
    rows = c.execute("SELECT workflow, paused_at FROM workflow_pauses ORDER BY workflow")
    return {w: float(t) for w, t in rows.fetchall()}
