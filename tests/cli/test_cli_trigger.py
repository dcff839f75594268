"""`ys trigger` and `ys.Client.trigger`: RFC 001's SDK table through the command line and the
client, params from -p / --params / stdin / a file, and refusals that admit nothing."""

from __future__ import annotations

import json
import re

import pytest
from cli_support import one_error_line, out_json, wait_status

from ys.errors import ExecutionAdmissionError, NotFound


def _record(daemon, execution_id: str) -> dict:
    with daemon.client() as c:
        return c.get(execution_id)


def _absent(daemon, execution_id: str) -> bool:
    with daemon.client() as c, pytest.raises(NotFound):
        c.get(execution_id)
    return True


# -- RFC 001: the SDK table -------------------------------------------------------------------


def test_trigger_without_an_id_prints_only_the_accepted_id(shared):
    result = shared.ys("trigger", "hello")
    assert result.returncode == 0, result.stderr
    execution_id = result.stdout.strip()
    assert result.stdout == execution_id + "\n"
    assert execution_id.startswith("hello-")
    assert _record(shared, execution_id)["workflow"] == "hello"


def test_client_trigger_without_an_id_returns_the_accepted_id(shared):
    with shared.client() as c:
        result = c.trigger("hello")
        assert result["started"] is True
        assert c.get(result["execution_id"])["execution_id"] == result["execution_id"]


def test_trigger_with_an_id_in_use_exits_3_and_says_what_to_do(shared):
    assert shared.ys("trigger", "hello", "--id", "order-42").returncode == 0
    wait_status(shared, "order-42", "completed")
    again = shared.ys("trigger", "hello", "--id", "order-42")
    assert again.returncode == 3
    assert again.stdout == ""
    line = one_error_line(again, "EXECUTION_ID_CONFLICT")
    assert line.startswith("EXECUTION_ID_CONFLICT: order-42 already exists (completed ")
    assert re.search(
        r"\(completed (just now|.+ ago)\); use another --id, or --if-exists "
        r"use-existing$",
        line,
    )


def test_client_trigger_with_an_id_in_use_raises_admission_error_from_http_409(shared):
    with shared.client() as c:
        c.trigger("hello", execution_id="order-43")
        with pytest.raises(ExecutionAdmissionError) as caught:
            c.trigger("hello", execution_id="order-43")
    assert caught.value.code == "EXECUTION_ID_CONFLICT"
    assert caught.value.context["status"] == 409


def test_trigger_returns_once_admission_commits_and_the_daemon_then_delivers(shared, tmp_path):
    gate = tmp_path / "gate"
    execution_id = shared.ys("trigger", "gate", "-p", f"gate={gate}").stdout.strip()
    # Returned with the record committed: readable at once, before the delivery can finish.
    record = _record(shared, execution_id)
    assert record["status"] in ("admitted", "running")
    assert record["outcome"] is None
    wait_status(shared, execution_id, "running")
    gate.touch()
    assert wait_status(shared, execution_id, "completed")["outcome"]["result"] == "done"


def test_if_exists_use_existing_gives_the_same_id_and_started_false(shared):
    first = out_json(shared.ys("trigger", "hello", "--id", "x-1", "-p", "n=1", "--json"))
    assert first == {"execution_id": "x-1", "started": True}
    again = out_json(
        shared.ys(
            "trigger", "hello", "--id", "x-1", "-p", "n=1", "--if-exists", "use-existing", "--json"
        )
    )
    assert again == {"execution_id": "x-1", "started": False}
    differs = shared.ys(
        "trigger", "hello", "--id", "x-1", "-p", "n=2", "--if-exists", "use-existing"
    )
    assert differs.returncode == 3
    one_error_line(differs, "EXECUTION_ID_CONFLICT")


def test_a_typo_in_the_workflow_name_suggests_the_closest_names_and_exits_4(shared):
    result = shared.ys("trigger", "helo", "--id", "typo-1")
    assert result.returncode == 4
    line = one_error_line(result, "WORKFLOW_NOT_FOUND")
    assert "did you mean hello?" in line
    assert _absent(shared, "typo-1")


# -- params -------------------------------------------------------------------------------------


def test_p_values_are_json_when_they_parse_and_strings_otherwise(shared):
    execution_id = shared.ys(
        "trigger",
        "hello",
        "-p",
        "order=42",
        "-p",
        "name=ann",
        "-p",
        "flag=true",
        "-p",
        'obj={"a": [1, 2]}',
        "-p",
        "empty=",
        "-p",
        "nan=NaN",
        "-p",
        "eq=a=b",
    ).stdout.strip()
    params = _record(shared, execution_id)["params"]
    assert params == {
        "order": 42,
        "name": "ann",
        "flag": True,
        "obj": {"a": [1, 2]},
        "empty": "",
        "nan": "NaN",
        "eq": "a=b",
    }


def test_params_from_stdin(shared):
    result = shared.ys(
        "trigger",
        "hello",
        "--params",
        "-",
        "--json",
        input=json.dumps({"name": "stdin", "n": [1, 2.5, None]}),
    )
    execution_id = out_json(result)["execution_id"]
    record = _record(shared, execution_id)
    assert record["params"] == {"name": "stdin", "n": [1, 2.5, None]}


def test_params_from_a_file_and_text_combined_with_p(shared, tmp_path):
    f = tmp_path / "params.json"
    f.write_text('{"name": "file"}')
    from_file = shared.ys("trigger", "hello", "--params", f"@{f}", "-p", "n=1").stdout.strip()
    assert _record(shared, from_file)["params"] == {"name": "file", "n": 1}
    literal = shared.ys("trigger", "hello", "--params", '{"a": 1}').stdout.strip()
    assert _record(shared, literal)["params"] == {"a": 1}


@pytest.mark.parametrize(
    "args",
    [
        ["-p", "order=1", "-p", "order=2"],  # a key given twice
        ["-p", "no-equals-sign"],
        ["-p", "=value"],
        ["--params", "{not json"],
        ["--params", "NaN"],
        ["--params", "[1]", "-p", "a=1"],  # -p needs an object to add to
        ["--params", '{"a": 1}', "-p", "a=2"],  # a key given by both
        ["--params", "@/nonexistent/params.json"],
        ["--timeout", "5"],  # --timeout without --wait
        ["--wait", "--timeout", "soon"],
    ],
)
def test_bad_params_exit_2_and_admit_nothing(shared, args):
    result = shared.ys("trigger", "hello", "--id", "never", *args)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    one_error_line(result, "INVALID_ARGUMENT")
    assert _absent(shared, "never")


def test_bad_json_on_stdin_exits_2_and_admits_nothing(shared):
    result = shared.ys(
        "trigger", "hello", "--id", "never-stdin", "--params", "-", input="{'single': 'quotes'}"
    )
    assert result.returncode == 2
    assert "INVALID_ARGUMENT: --params from stdin is not valid JSON" in result.stderr
    assert _absent(shared, "never-stdin")


DEEP = "[" * 1500 + "]" * 1500  # deeper than Python's json reads without a RecursionError


@pytest.mark.parametrize(
    "args",
    [
        ["trigger", "hello", "--id", "never-deep", "--params", "@FILE"],
        ["trigger", "hello", "--id", "never-deep", "--params", "-"],
        ["trigger", "hello", "--id", "never-deep", "-p", f"x={DEEP}"],
        ["store", "put", "never-deep", DEEP],
        ["store", "put", "never-deep", "@FILE"],
        ["schedule", "add", "never-deep", "hello", "--cron", "0 3 * * *", "--params", "@FILE"],
        ["schedule", "add", "never-deep", "hello", "--cron", "0 3 * * *", "-p", f"x={DEEP}"],
        ["retry", "never-deep", "--params", "@FILE"],
        ["retry", "never-deep", "-p", f"x={DEEP}"],
        ["step", "start", "never-deep", "hello", "--params", "@FILE"],
        ["step", "start", "never-deep", "hello", "-p", f"x={DEEP}"],
    ],
    ids=lambda args: " ".join(a if len(a) < 20 else "DEEP" for a in args[:2] + args[-2:-1]),
)
def test_json_nested_too_deeply_is_refused_by_every_command_that_reads_it(shared, tmp_path, args):
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    args = [str(deep).join(("@", "")) if a == "@FILE" else a for a in args]
    result = shared.ys(*args, input=DEEP)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "nests too deeply" in one_error_line(result, "INVALID_ARGUMENT")
    with shared.client() as c:
        assert _absent(shared, "never-deep")
        assert all(s["name"] != "never-deep" for s in c.schedules()["schedules"])
        assert all(e["key"] != "never-deep" for e in c.store_list()["entries"])


def test_a_usage_error_is_one_line_and_exits_2(shared):
    result = shared.ys("trigger", "hello", "--if-exists", "sometimes")
    assert result.returncode == 2
    assert "'sometimes' is not one of 'fail', 'use-existing'" in one_error_line(
        result, "INVALID_ARGUMENT"
    )


# -- --wait ---------------------------------------------------------------------------------


def test_trigger_wait_prints_the_id_then_exits_0_when_completed(shared):
    result = shared.ys("trigger", "hello", "--id", "w-ok", "--wait")
    assert (result.returncode, result.stdout) == (0, "w-ok\n")
    assert "w-ok completed" in result.stderr


def test_trigger_wait_exits_1_when_the_workflow_fails(shared):
    result = shared.ys("trigger", "boom", "--id", "w-fail", "--wait", "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout) == {"execution_id": "w-fail", "started": True}


def test_trigger_wait_timeout_exits_6(shared):
    result = shared.ys("trigger", "nap", "--id", "w-late", "--wait", "--timeout", "0.3s")
    assert result.returncode == 6
    assert result.stdout == "w-late\n"
    assert "ys wait w-late" in one_error_line(result, "TIMEOUT")


def test_json_within_the_nesting_limit_passes_and_one_level_more_is_refused(shared):
    from ys.codec import MAX_DEPTH

    ok = shared.ys("trigger", "hello", "--id", "deep-ok", "-p", "x=" + "[" * 63 + "]" * 63)
    assert ok.returncode == 0, ok.stderr
    over = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    refused = shared.ys("trigger", "hello", "--id", "never-deeper", "--params", over)
    assert refused.returncode == 2 and "nests too deeply" in refused.stderr
    assert _absent(shared, "never-deeper")
