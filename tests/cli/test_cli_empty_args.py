"""An empty ID, key or name is a usage error (exit 2, one line that points at the command's
help), never a request to a bare route that answers NOT_FOUND; the fast path of `ys get --json`
says the same as the typer path, and ys.Client refuses it before sending anything."""

from __future__ import annotations

import pytest
from cli_support import one_error_line

from ys.errors import InvalidArgument

EMPTY = [
    ["get", ""],
    ["get", "", "--json"],
    ["get", "--json", ""],
    ["describe", ""],
    ["wait", ""],
    ["wake", ""],
    ["cancel", ""],
    ["history", ""],
    ["history", "", "--follow"],
    ["logs", ""],
    ["list", "--parent", ""],
    ["effect", ""],
    ["store", "put", "", "x"],
    ["store", "get", ""],
    ["store", "rm", ""],
    ["schedule", "next", ""],
    ["schedule", "rm", ""],
    ["schedule", "pause", ""],
    ["schedule", "resume", ""],
    ["schedule", "add", "", "hello", "--cron", "0 3 * * *"],
]


@pytest.mark.parametrize("args", EMPTY, ids=" ".join)
def test_an_empty_id_key_or_name_is_a_usage_error(shared, args):
    result = shared.ys(*args)
    assert result.returncode == 2, result.stderr
    line = one_error_line(result, "INVALID_ARGUMENT")
    assert "must not be empty" in line and "--help" in line, line


def test_the_fast_path_and_the_typer_path_say_the_same_about_an_empty_id(shared):
    fast = shared.ys("get", "", "--json")
    slow = shared.ys("get", "", "--json", env={"YS_NO_FAST_PATH": "1"})
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        slow.returncode,
        slow.stdout,
        slow.stderr,
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.get(""),
        lambda c: c.wait("", timeout=1),
        lambda c: c.store_put("", 1),
        lambda c: c.store_get(""),
        lambda c: c.effect(""),
        lambda c: c.schedule_next(""),
    ],
)
def test_the_client_refuses_an_empty_id_before_sending_it(shared, call):
    with shared.client() as c, pytest.raises(InvalidArgument, match="must not be empty"):
        call(c)
