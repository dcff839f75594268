"""Workflow options (docs/design.md, "Workflow options") as the registry reads them from a `# ys:` header or a
decorator: parsed into WorkflowOptions, or refused with a message naming the option."""

from __future__ import annotations

import pytest

from ys.daemon.scripts import (
    DEFAULT_MAX_ATTEMPTS,
    DeclaredSchedule,
    ScheduleArgs,
    WorkflowOptions,
    options_error,
    parse_header,
    parse_options,
    schedule_args,
    schedule_error,
    split_options,
)


def _header(line: str) -> WorkflowOptions:
    schedule, options = split_options(parse_header([line]))
    return parse_options(options)


def test_a_header_sets_every_option_and_leaves_the_schedule_apart():
    declared = parse_header(
        ['# ys: timeout=10m max_attempts=3 concurrency=1 key=host schedule="0 3 * * *" pin\n']
    )
    schedule, options = split_options(declared)
    assert schedule == DeclaredSchedule(schedule="0 3 * * *")
    assert schedule.to_json() == {"schedule": "0 3 * * *"}  # as `ys workflows --json` shows it
    assert parse_options(options) == WorkflowOptions(
        timeout=600.0, max_attempts=3, concurrency=1, key="host", pin=True
    )


def test_a_declared_schedule_becomes_the_arguments_of_schedule_add():
    schedule, _ = split_options(
        parse_header(["# ys: every=15m tz=UTC jitter=30s params='{\"a\": 1}' overlap=queue\n"])
    )
    assert schedule is not None and schedule.has_rule
    assert schedule_args("w", schedule) == ScheduleArgs(
        cron_expr=schedule_args("w", DeclaredSchedule(every=900)).cron_expr,
        tz="UTC",
        catch_up="once",
        overlap="queue",
        max_late=None,
        jitter=30.0,
        params={"a": 1},
    )
    with pytest.raises(ValueError, match="not both"):
        schedule_args("w", DeclaredSchedule(schedule="* * * * *", every="1m"))


def test_params_none_is_declared_not_absent():
    """`@ys.workflow(params=None)` writes params: without a schedule it is refused as params
    with nothing to fire them; with one the list shows it as null, and it fires with none."""
    alone, _ = split_options({"params": None})
    assert alone is not None
    assert "add a schedule" in (schedule_error("w", alone) or "")
    scheduled, _ = split_options({"schedule": "0 3 * * *", "params": None})
    assert scheduled is not None and schedule_error("w", scheduled) is None
    assert scheduled.to_json() == {"schedule": "0 3 * * *", "params": None}
    assert schedule_args("w", scheduled).params is None
    assert DeclaredSchedule(schedule="0 3 * * *").to_json() == {"schedule": "0 3 * * *"}


def test_a_declared_schedule_shows_each_key_written_a_none_as_null():
    """`ys workflows --json` shows the schedule as declared: `tz=None` (the local zone) is
    written, so it shows as null as `params=None` does; a key not written is left out."""
    scheduled, _ = split_options({"schedule": "0 3 * * *", "tz": None, "jitter": None})
    assert scheduled is not None and schedule_error("w", scheduled) is None
    assert scheduled.to_json() == {"schedule": "0 3 * * *", "tz": None, "jitter": None}
    assert schedule_args("w", scheduled).tz == schedule_args("w", DeclaredSchedule("0 3 * * *")).tz
    assert scheduled == DeclaredSchedule(schedule="0 3 * * *")  # what it fires by is the same


def test_defaults_and_decorator_values():
    assert parse_options({}) == WorkflowOptions(max_attempts=DEFAULT_MAX_ATTEMPTS)
    assert parse_options({"timeout": 2, "max_attempts": 5, "concurrency": 2, "key": "a"}) == (
        WorkflowOptions(timeout=2.0, max_attempts=5, concurrency=2, key="a")
    )
    assert _header("# ys: timeout=1.5h\n").timeout == 5400.0


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"timeout": "soon"}, "bad timeout"),
        ({"timeout": 0}, "bad timeout"),
        ({"timeout": True}, "bad timeout"),
        ({"timeout": "[1]"}, "bad timeout"),
        ({"max_attempts": 0}, "bad max_attempts"),
        ({"max_attempts": "2.5"}, "bad max_attempts"),
        ({"concurrency": -1}, "bad concurrency"),
        ({"concurrency": True}, "bad concurrency"),
        ({"key": "host"}, "key needs concurrency"),
        ({"concurrency": 1, "key": " "}, "bad key"),
        ({"on_failure": "no/such"}, "bad on_failure"),
        ({"retries": 3}, "unknown option 'retries'"),
    ],
)
def test_a_bad_option_is_refused_naming_it(options, why):
    error = options_error(options)
    assert error is not None and why in error, error


@pytest.mark.parametrize("timeout", [1e12, 1e300])
def test_a_timeout_past_the_year_9999_is_the_scripts_load_error(timeout):
    # the store could not record it (times end in 9999): refused here, as a header's is
    with pytest.raises(ValueError, match="bad timeout"):
        parse_options({"timeout": timeout})
