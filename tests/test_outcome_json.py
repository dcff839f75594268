"""A delivery's outcome read from its JSON once, where it enters the daemon (ys.outcomes), and
answered back the same (ys.values.Outcome.to_json): the shapes the worker sends, and the
refusals of what is not one."""

from __future__ import annotations

from typing import Any

import pytest

from ys.errors import InvalidArgument
from ys.outcomes import outcome_of
from ys.values import Outcome, OutcomeError


@pytest.mark.parametrize(
    "wire",
    [
        {"status": "completed", "result": {"receipt": "r-1", "items": [1, None]}},
        {"status": "completed", "result": None},
        {"status": "failed", "error": {"name": "CardDeclined", "message": "card 4242"}},
        {
            "status": "failed",
            "error": {
                "name": "E",
                "message": "m",
                "code": "C",
                "traceback": "t",
                "cause": {"$error": {"name": "Inner", "message": "x"}},
            },
        },
        {"status": "cancelled"},
        {"status": "suspended"},
    ],
    ids=["completed", "completed-null", "failed", "failed-full", "cancelled", "suspended"],
)
def test_an_outcome_read_from_json_answers_the_same_json(wire: dict[str, Any]) -> None:
    assert outcome_of(wire).to_json() == wire


def test_fields_are_typed_and_warnings_are_kept_but_never_answered() -> None:
    failed = outcome_of(
        {"status": "failed", "error": {"name": "E", "code": "C"}, "warnings": ["drift"]}
    )
    assert failed == Outcome("failed", error=OutcomeError("E", "", code="C"), warnings=("drift",))
    assert failed.to_json() == {
        "status": "failed",
        "error": {"name": "E", "message": "", "code": "C"},
    }
    # what does not belong to the status is not carried
    assert outcome_of({"status": "completed", "result": 1, "error": {"name": "E"}}) == Outcome(
        "completed", 1
    )


@pytest.mark.parametrize(
    "wire, message",
    [
        ("completed", "must be an object"),
        ({"result": 1}, "unknown outcome status None"),
        ({"status": "done"}, "unknown outcome status 'done'"),
        ({"status": "failed"}, "needs error.name"),
        ({"status": "failed", "error": {"message": "m"}}, "needs error.name"),
        ({"status": "failed", "error": {"name": "E", "code": 7}}, "error.code must be text"),
        ({"status": "failed", "error": {"name": "E", "traceback": []}}, "traceback must be text"),
        ({"status": "suspended", "warnings": "one"}, "warnings must be a list of text"),
        ({"status": "completed", "warnings": [1]}, "warnings must be a list of text"),
    ],
)
def test_what_is_not_an_outcome_is_refused_saying_why(wire: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message) as info:
        outcome_of(wire)
    assert info.value.code == "INVALID_ARGUMENT"
