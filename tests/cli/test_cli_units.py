"""In-process checks of the pieces under the commands: durations, params, the error line."""

from __future__ import annotations

import pytest

from ys.commands._output import error_line
from ys.commands._params import build_params, param_value
from ys.durations import format_duration, parse_duration, relative
from ys.errors import InvalidArgument, YsError, from_code


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("90", 90),
        ("90s", 90),
        ("10m", 600),
        ("2h", 7200),
        ("1d", 86400),
        ("1.5h", 5400),
        ("0.25", 0.25),
        (" 5m ", 300),
        (".5s", 0.5),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "10x", "-5", "1h30m", "ten", "1e3", "inf", "nan"])
def test_bad_durations_are_invalid_argument(text):
    with pytest.raises(InvalidArgument) as caught:
        parse_duration(text, "--timeout")
    assert caught.value.exit_code == 2
    assert "--timeout" in caught.value.message and "10m" in caught.value.message


def test_format_duration_and_relative_times():
    assert [format_duration(s) for s in (0.42, 45, 180, 190, 7500, 93600)] == [
        "0.4s",
        "45s",
        "3m",
        "3m 10s",
        "2h 5m",
        "1d 2h",
    ]
    now = 1_800_000_000.0
    assert relative("2027-01-15T08:00:00.000Z", now=now + 180) == "3m ago"
    assert relative("2027-01-15T08:00:00.000Z", now=now - 300) == "in 5m"
    assert relative(None) == "-"


def test_param_values_parse_as_json_or_stay_strings():
    assert [
        param_value(v)
        for v in ("42", "1.5", "true", "null", '"q"', "[1]", "x y", "NaN", "Infinity", "")
    ] == [42, 1.5, True, None, "q", [1], "x y", "NaN", "Infinity", ""]


def test_build_params_merges_p_into_params_and_refuses_repeats():
    assert build_params(None, None) is None
    assert build_params(["a=1"], '{"b": 2}') == {"b": 2, "a": 1}
    assert build_params(None, "[1, 2]") == [1, 2]
    for pairs, spec in ((["a=1", "a=2"], None), (["a=1"], '{"a": 0}'), (["a=1"], "3")):
        with pytest.raises(YsError) as caught:
            build_params(pairs, spec)
        assert caught.value.code == "INVALID_ARGUMENT"


def test_error_line_adds_the_hint_unless_the_message_has_its_own():
    assert error_line(from_code("EXECUTION_NOT_FOUND", "execution 'x' does not exist")) == (
        "EXECUTION_NOT_FOUND: execution 'x' does not exist; `ys list` shows the executions "
        "there are"
    )
    assert (
        error_line(from_code("WORKFLOW_NOT_FOUND", "no workflow 'helo'; did you mean hello?"))
        == "WORKFLOW_NOT_FOUND: no workflow 'helo'; did you mean hello?"
    )
    assert error_line(from_code("TIMEOUT", "late", hint="wait more")) == "TIMEOUT: late; wait more"
    assert error_line(YsError("SOMETHING_NEW", "two\nlines")) == "SOMETHING_NEW: two lines"
