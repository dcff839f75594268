"""What the PostgreSQL adapter shares with the SQLite one: the pure parts, which hold no SQL
(events folded into rows, outcomes checked, execution IDs drawn, page tokens, schedule rows
and checks, the group writer's request and how it is answered). One module imports them, so
that the adapter's other modules do not depend on where the SQLite adapter keeps them."""

from __future__ import annotations

from ys.store.db import _UNSET as UNSET
from ys.store.db import _answer as answer
from ys.store.db import _Request as Request
from ys.store.executions import (
    admission_event,
    encode_event_value,
    event_text,
    new_execution_id,
    new_record_row,
    outcome_event,
    project,
    step_error,
)
from ys.store.reads import (
    check_limit,
    deliveries,
    failed_attempts,
    history_token,
    list_token,
    parse_history_token,
    parse_list_token,
)
from ys.store.schedules import _row as schedule_row
from ys.store.schedules import check as check_schedule
from ys.store.schedules import slot_id

try:  # the store checks a start's canonical params (ys.store.base, from issue 13 on)
    from ys.store.base import check_params_json  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - until that lands, the worker's encoding is trusted
    def check_params_json(params_json: str) -> str:
        return params_json

try:  # where the effect request check lives once issue 13 lands
    from ys.contract import check_effect_request
except ImportError:  # pragma: no cover
    from ys.store.base import check_request as check_effect_request

__all__ = [
    "UNSET", "Request", "admission_event", "answer", "check_effect_request", "check_limit",
    "check_params_json", "check_schedule", "deliveries", "encode_event_value", "event_text",
    "failed_attempts", "history_token", "list_token", "new_execution_id", "new_record_row",
    "outcome_event", "parse_history_token", "parse_list_token", "project", "schedule_row",
    "slot_id", "step_error",
]
