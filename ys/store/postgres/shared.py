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
from ys.store.sql.events import (
    admission_event,
    encode_event_value,
    new_execution_id,
    outcome_event,
)
from ys.store.sql.lists import deliveries, failed_attempts, list_page, list_query, prefix_end
from ys.store.sql.requests import UNSET, Request, answer
from ys.store.sql.retrying import (
    already_retried,
    check_retry,
    links_to,
    not_terminal,
    retry_ids,
    step_copy_event,
    steps_to_copy,
)
from ys.store.sql.rows import RECORD_COLUMNS, event_text, new_record_row, project, row_to_record
from ys.store.sql.schedule_rows import schedule_row, slot_row, slot_rows
from ys.store.sql.steps import STEP_COLUMNS, completed_step, run_state, step_error, step_save

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
