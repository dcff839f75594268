"""What a script may declare as its concurrency limit (`concurrency=N`, `key=FIELD`, from the
decorator as numbers or from a `# ys:` header as text), and what is its load error."""

from __future__ import annotations

import pytest

from ys.daemon.registry import Workflow
from ys.daemon.scripts import options_error, parse_header, parse_options, split_options
from ys.store.base import SLOT_ALL, SLOT_MISSING, ConcurrencyLimit, slot_of


def concurrency_limit(options: dict) -> tuple[ConcurrencyLimit | None, str | None]:
    """(the limit a workflow with these declared options enforces, or its load error)."""
    why = options_error(options)
    if why is not None:
        return None, why
    return Workflow("w", "python", "/w.py", options=parse_options(options)).limit, None


def test_a_header_line_declares_the_limit_and_its_key():
    _, options = split_options(parse_header(["#!/bin/sh\n", "# ys: concurrency=1 key=host\n"]))
    assert concurrency_limit(options) == (ConcurrencyLimit(1, "host"), None)


def test_a_decorator_declares_it_as_a_number():
    assert concurrency_limit({"concurrency": 3}) == (ConcurrencyLimit(3), None)
    assert concurrency_limit({}) == (None, None)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"concurrency": 0}, "bad concurrency: 0"),
        ({"concurrency": "none"}, "bad concurrency: 'none' must be a whole number"),
        ({"concurrency": True}, "bad concurrency: True must be a whole number"),
        ({"concurrency": 1.5}, "bad concurrency: 1.5 must be a whole number"),
        ({"key": "host"}, "key needs concurrency"),
        ({"concurrency": 2, "key": ""}, "bad key: ''"),
    ],
)
def test_a_bad_limit_is_the_scripts_load_error(options, error):
    limit, why = concurrency_limit(options)
    assert limit is None and why is not None and why.startswith(error), why


def test_the_slot_group_is_the_key_fields_canonical_value_or_missing():
    assert slot_of('{"account":"a"}', None) == SLOT_ALL
    assert slot_of('{"account":"a"}', "account") == '"a"'
    assert slot_of('{"account":{"y":1,"x":2}}', "account") == '{"x":2,"y":1}'
    assert slot_of('{"account":1}', "account") != slot_of('{"account":"1"}', "account")
    assert slot_of('{"other":1}', "account") == SLOT_MISSING
    assert slot_of("null", "account") == SLOT_MISSING
