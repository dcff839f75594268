"""What the PostgreSQL adapter shares with the SQLite one: the pure parts, which hold no SQL
(events folded into rows, outcomes checked, execution IDs drawn, page tokens, schedule rows
and checks, the group writer's request and how it is answered). One module imports them, so
that the adapter's other modules do not depend on where the SQLite adapter keeps them."""

from __future__ import annotations

from ys.contract import check_effect_request, check_params_json, slot_id
from ys.contract import check_schedule as check_schedule
from ys.store.base import Then as Then
from ys.store.paging import (
    check_limit,
    history_token,
    list_token,
    parse_history_token,
    parse_list_token,
)
from ys.store.sqlite.db import _UNSET as UNSET
from ys.store.sqlite.db import _answer as answer
from ys.store.sqlite.db import _Request as Request
from ys.store.sqlite.executions import _RECORD_COLUMNS as RECORD_COLUMNS
from ys.store.sqlite.executions import STEP_COLUMNS as STEP_COLUMNS
from ys.store.sqlite.executions import (
    admission_event,
    completed_step,
    encode_event_value,
    event_text,
    new_execution_id,
    new_record_row,
    outcome_event,
    project,
    row_to_record,
    run_state,
    step_error,
    step_save,
)
from ys.store.sqlite.overview import _prefix_end as prefix_end
from ys.store.sqlite.reads import deliveries, failed_attempts, list_page, list_query
from ys.store.sqlite.retries import (
    already_retried,
    check_retry,
    links_to,
    not_terminal,
    retry_ids,
    step_copy_event,
    steps_to_copy,
)
from ys.store.sqlite.schedules import _row as schedule_row
from ys.store.sqlite.slots import _rows as slot_rows
from ys.store.sqlite.slots import _slot as slot_row

__all__ = [
    "RECORD_COLUMNS",
    "STEP_COLUMNS",
    "Then",
    "row_to_record",
    "run_state",
    "UNSET",
    "Request",
    "admission_event",
    "already_retried",
    "links_to",
    "answer",
    "completed_step",
    "step_save",
    "check_effect_request",
    "check_limit",
    "check_params_json",
    "check_retry",
    "check_schedule",
    "deliveries",
    "encode_event_value",
    "event_text",
    "failed_attempts",
    "history_token",
    "list_page",
    "list_query",
    "list_token",
    "new_execution_id",
    "new_record_row",
    "not_terminal",
    "outcome_event",
    "parse_history_token",
    "parse_list_token",
    "prefix_end",
    "project",
    "retry_ids",
    "schedule_row",
    "slot_id",
    "slot_row",
    "slot_rows",
    "step_copy_event",
    "step_error",
    "steps_to_copy",
]
