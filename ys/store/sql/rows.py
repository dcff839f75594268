"""An execution's rows, engine-neutral: the record's columns and their reader, the canonical
JSON of events, and the pure fold of events into a record and the rows that persist it."""

from __future__ import annotations

import json
from typing import Any

from ys.store.eventdata import JsonObject, Parent
from ys.store.records import Event, RawJSON, Record, apply, outcome_of_json

RECORD_COLUMNS = (
    "execution_id, workflow, {params}, {context}, status, outcome, admitted_at, updated_at, "
    "due_at, covered_due_at, prior_status, attempts, parent_id, parent_step, parent_detached, "
    "cancel_requested, history_length, script_sha256, tags, retry_of, retried_by"
)


FULL = RECORD_COLUMNS.format(params="params", context="context")


LIGHT = RECORD_COLUMNS.format(params="''", context="''")


def row_to_record(row: tuple[Any, ...]) -> Record:
    parent = None
    if row[12] is not None:
        parent = Parent(row[12], row[13], bool(row[14]))
    return Record(
        execution_id=row[0],
        workflow=row[1],
        params_json=row[2],
        context_json=row[3],
        status=row[4],
        outcome=outcome_of_json(json.loads(row[5])) if row[5] is not None else None,
        admitted_at=row[6],
        updated_at=row[7],
        due_at=row[8],
        covered_due_at=row[9],
        prior_status=row[10],
        attempts=row[11],
        parent=parent,
        cancel_requested=bool(row[15]),
        history_length=row[16],
        script_sha256=row[17],
        tags=json.loads(row[18]) if row[18] else {},
        retry_of=row[19],
        retried_by=row[20],
    )


JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


_STR = json.encoder.encode_basestring  # a str as JSON, ensure_ascii=False (C when available)


def event_text(data: JsonObject) -> str:
    """Canonical JSON of an event's data (its `to_json`); RawJSON values (params) are embedded
    unchanged."""
    parts = []
    for key in sorted(data):
        value = data[key]
        if isinstance(value, RawJSON):
            text: str = value
        elif type(value) is str:
            text = _STR(value)
        else:
            text = JSON(value)
        parts.append(_STR(key) + ":" + text)
    return "{" + ",".join(parts) + "}"


def tags_text(tags: dict[str, str]) -> str | None:
    """The executions row's copy of the tags (NULL when there are none)."""
    return JSON(tags) if tags else None


def tag_rows(record: Record) -> list[tuple[Any, ...]]:
    return [(k, v, record.admitted_at, record.execution_id) for k, v in record.tags.items()]


def project(prior: Record | None, events: list[Event]) -> tuple[Record, list[tuple[Any, ...]], int]:
    """Pure: the record after `events` (folded with `apply`), their rows and their size in
    bytes. `append` persists the result; an admission computes it before its transaction."""
    record = prior
    seq = prior.history_length if prior else 0
    nbytes = 0
    rows = []
    for e in events:
        record = apply(record, e)
        seq += 1
        text = event_text(e.data.to_json())
        nbytes += len(text.encode("utf-8"))  # bytes, not characters
        rows.append((record.execution_id, seq, e.at, e.kind, text))
    assert record is not None
    return record, rows, nbytes


def outcome_text(record: Record) -> str | None:
    return JSON(record.outcome.to_json()) if record.outcome is not None else None


def new_record_row(record: Record, history_bytes: int) -> tuple[Any, ...]:
    """The executions row of a record that is not stored yet (INSERT_EXECUTION's values)."""
    p = record.parent
    return (
        record.execution_id,
        record.workflow,
        record.params_json,
        record.context_json,
        record.status,
        outcome_text(record),
        record.admitted_at,
        record.updated_at,
        record.due_at,
        record.covered_due_at,
        record.prior_status,
        record.attempts,
        p.execution_id if p else None,
        p.step_key if p else None,
        p.detached if p else None,
        record.cancel_requested,  # a bool: 0/1 on SQLite, boolean on PostgreSQL
        record.history_length,
        history_bytes,
        record.script_sha256,
        tags_text(record.tags),
        record.retry_of,
    )
