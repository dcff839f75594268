"""Workflow pauses (`ys workflows pause W`), as engine-neutral SQL: `?` placeholders, which
the PostgreSQL adapter turns into `%s` (`pg`). A paused workflow's executions are still
admitted; no claim takes them (both adapters' claim statements add SKIP_PAUSED) until it is
resumed, on any daemon sharing the database (docs/design.md §8)."""

from __future__ import annotations

PAUSE = (
    "INSERT INTO workflow_pauses (workflow, paused_at) VALUES (?, ?) "
    "ON CONFLICT (workflow) DO NOTHING"
)
RESUME = "DELETE FROM workflow_pauses WHERE workflow=?"
PAUSED = "SELECT workflow, paused_at FROM workflow_pauses ORDER BY workflow"
IS_PAUSED = "SELECT 1 FROM workflow_pauses WHERE workflow=?"
# Appended to a claim's WHERE over `executions`: its workflow is not paused.
SKIP_PAUSED = (
    "AND NOT EXISTS (SELECT 1 FROM workflow_pauses p WHERE p.workflow = executions.workflow) "
)


def pg(statement: str) -> str:
    """The statement with PostgreSQL's placeholders."""
    return statement.replace("?", "%s")
