"""Admissions prepared for SQLite's group writer: a new execution's rows computed before its
transaction, inserted with the other admissions of a batch by a few multi-row INSERTs
(ys/store/sqlite/db.py). SQLite's alone: the statements carry no ON CONFLICT clause, so a
taken ID fails the batch's insert, which then runs each admission's own body instead
(`ys.store.sql.executions.admit_tx`, which decides what the write means)."""

from __future__ import annotations

from typing import Any

from ys.store.base import Parent
from ys.store.sql.events import admission_event
from ys.store.sql.rows import new_record_row, project, tag_rows

INSERT_EXECUTION = (
    "INSERT INTO executions (execution_id, workflow, params, context, status, outcome, "
    "admitted_at, updated_at, due_at, covered_due_at, prior_status, attempts, parent_id, "
    "parent_step, parent_detached, cancel_requested, history_length, history_bytes, "
    "script_sha256, tags, retry_of) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
INSERT_EVENT = "INSERT INTO events (execution_id, seq, at, kind, data) VALUES (?,?,?,?,?)"
# One row per tag, in the order lists read (`ys list --tag k=v`: newest admitted first).
INSERT_TAG = "INSERT INTO execution_tags (key, value, admitted_at, execution_id) VALUES (?,?,?,?)"


def admission_inserts(
    execution_id: str,
    workflow: str,
    params_json: str,
    context_json: str,
    parent: Parent | None,
    at: float,
    script_sha256: str | None = None,
    tags: dict[str, str] | None = None,
    due_at: float | None = None,
) -> list[tuple[str, tuple[Any, ...]]]:
    """A new execution's rows, computed outside any transaction: what `admit_tx` writes when
    `execution_id` is unused. The group writer inserts many of these per commit."""
    event = admission_event(
        execution_id,
        workflow,
        params_json,
        context_json,
        parent,
        at,
        script_sha256,
        tags,
        due_at=due_at,
    )
    record, rows, nbytes = project(None, [event])
    out = [(INSERT_EXECUTION, new_record_row(record, nbytes)), (INSERT_EVENT, rows[0])]
    out += [(INSERT_TAG, row) for row in tag_rows(record)]
    return out
