"""Reading commands: the JSON shapes of docs/API.md for get, list, ps, describe, history,
workflows and wake, and what people see (tables, colour only when asked for)."""

from __future__ import annotations

import re

from cli_support import ISO, admit, one_error_line, out_json, wait_status, wait_until

RECORD = {
    "execution_id",
    "workflow",
    "status",
    "params",
    "context",
    "outcome",
    "admitted_at",
    "updated_at",
    "due_at",
    "attempts",
    "parent",
}
STATUSES = {"admitted", "running", "suspended", "completed", "failed", "cancelled"}
COLOUR = re.compile(r"\x1b\[[0-9;]*3[0-7]m")  # a foreground colour escape


def check_record(r: dict) -> None:
    assert RECORD <= set(r), RECORD - set(r)
    assert isinstance(r["execution_id"], str) and isinstance(r["workflow"], str)
    assert r["status"] in STATUSES
    assert ISO.match(r["admitted_at"]) and ISO.match(r["updated_at"])
    assert r["due_at"] is None or ISO.match(r["due_at"])
    assert isinstance(r["attempts"], int)
    assert isinstance(r["context"], dict)
    assert r["parent"] is None or {"execution_id", "step_key", "detached"} <= set(r["parent"])
    o = r["outcome"]
    if r["status"] == "completed":
        assert set(o) == {"status", "result"} and o["status"] == "completed"
    elif r["status"] == "failed":
        assert o["status"] == "failed" and {"name", "message"} <= set(o["error"])
    elif r["status"] == "cancelled":
        assert o == {"status": "cancelled"}
    else:
        assert o is None


def finished(shared, workflow: str, execution_id: str, **params: object) -> dict:
    admit(shared, workflow, execution_id, **params)
    return wait_status(shared, execution_id, "completed", "failed")


# -- get ----------------------------------------------------------------------------------------


def test_get_json_is_the_record(shared):
    finished(shared, "hello", "rd-get", name="x")
    record = out_json(shared.ys("get", "rd-get", "--json"))
    check_record(record)
    assert record["outcome"] == {"status": "completed", "result": {"greeting": "hello, x"}}
    assert (record["params"], record["attempts"], record["due_at"]) == ({"name": "x"}, 1, None)


def test_get_json_of_a_failed_execution_has_the_error(shared):
    finished(shared, "boom", "rd-boom")
    record = out_json(shared.ys("get", "rd-boom", "--json"))
    check_record(record)
    assert record["outcome"]["error"]["name"] == "ValueError"
    assert record["outcome"]["error"]["message"] == "boom"


def test_get_of_an_unknown_id_exits_4_with_one_line(shared):
    result = shared.ys("get", "no-such-execution")
    assert (result.returncode, result.stdout) == (4, "")
    assert "no-such-execution" in one_error_line(result, "EXECUTION_NOT_FOUND")


def test_get_for_people_is_plain_when_piped_and_coloured_only_when_forced(shared):
    finished(shared, "hello", "rd-people")
    plain = shared.ys("get", "rd-people")
    assert plain.returncode == 0
    assert "rd-people" in plain.stdout and "completed" in plain.stdout
    assert '{"greeting": "hello, world"}' in plain.stdout
    assert "\x1b[" not in plain.stdout
    forced = shared.ys("get", "rd-people", env={"FORCE_COLOR": "1"})
    assert COLOUR.search(forced.stdout)
    no_color = shared.ys("get", "rd-people", env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert not COLOUR.search(no_color.stdout)


# -- list and ps --------------------------------------------------------------------------------


def test_list_pages_newest_first_and_tells_people_the_next_token(shared):
    for n in (1, 2, 3):
        assert shared.ys("trigger", "pager", "--id", f"pg-{n}").returncode == 0
    first = out_json(shared.ys("list", "--workflow", "pager", "--limit", "2", "--json"))
    assert set(first) == {"executions", "next_page_token"}
    assert [r["execution_id"] for r in first["executions"]] == ["pg-3", "pg-2"]
    for r in first["executions"]:
        check_record(r)
    token = first["next_page_token"]
    assert isinstance(token, str)
    rest = out_json(
        shared.ys("list", "--workflow", "pager", "--limit", "2", "--page-token", token, "--json")
    )
    assert [r["execution_id"] for r in rest["executions"]] == ["pg-1"]
    assert rest["next_page_token"] is None

    people = shared.ys("list", "--workflow", "pager", "--limit", "2")
    assert people.returncode == 0
    assert "pg-3" in people.stdout and "pg-1" not in people.stdout
    assert f"more: ys list --workflow pager --limit 2 --page-token {token}" in people.stderr
    assert token not in people.stdout


def test_list_filters_by_status(shared):
    finished(shared, "boom", "rd-st-failed")
    page = out_json(shared.ys("list", "--status", "failed", "--json"))
    assert page["executions"] and {r["status"] for r in page["executions"]} == {"failed"}
    bad = shared.ys("list", "--status", "sleeping")
    assert bad.returncode == 2
    one_error_line(bad, "INVALID_ARGUMENT")


STARTER = """
    import ys

    @ys.workflow
    def main(step, params):
        return step.start("kid", "hello", params={"name": "kid"})
"""


def _columns(stdout: str) -> dict[str, dict[str, str]]:
    """A table's rows by ID, each cell under its header (cut at the headers' positions)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    header = lines[0]
    names = header.split()
    starts = [header.index(n) for n in names] + [None]
    return {
        row[: starts[1]].strip(): {
            n: row[a:b].strip() for n, a, b in zip(names, starts, starts[1:], strict=False)
        }
        for row in lines[1:]
    }


def test_list_wide_shows_a_parent_and_a_retry_in_columns_of_their_own(shared):
    shared.write("starter.py", STARTER)
    wait_until(
        lambda: shared.ys("workflows", "--json").stdout.count('"starter"'),
        message="starter to load",
    )
    child = finished(shared, "starter", "wd-parent")["outcome"]["result"]
    finished(shared, "boom", "wd-bad")
    retried = out_json(shared.ys("retry", "wd-bad", "--json"))["execution_id"]
    wait_status(shared, retried, "failed")
    wide = shared.ys("list", "--wide", "--limit", "1000", env={"COLUMNS": "300"})
    assert wide.returncode == 0, wide.stderr
    rows = _columns(wide.stdout.replace("RETRY OF", "RETRY_OF"))
    assert (rows[retried]["PARENT"], rows[retried]["RETRY_OF"]) == ("-", "wd-bad")
    assert (rows[child]["PARENT"], rows[child]["RETRY_OF"]) == ("wd-parent", "-")
    assert (rows["wd-bad"]["PARENT"], rows["wd-bad"]["RETRY_OF"]) == ("-", "-")


def test_ps_shows_suspended_and_running_with_due_time_attempt_and_lease_holder(shared, tmp_path):
    admit(shared, "nap", "ps-nap")
    wait_status(shared, "ps-nap", "suspended")
    gate = tmp_path / "gate"
    admit(shared, "gate", "ps-run", gate=str(gate))
    wait_status(shared, "ps-run", "running")
    finished(shared, "hello", "ps-done")
    try:
        page = out_json(shared.ys("ps", "--json"))
        assert set(page) == {"executions", "next_page_token"}
        by_id = {r["execution_id"]: r for r in page["executions"]}
        for r in by_id.values():
            check_record(r)
            assert r["status"] in ("admitted", "running", "suspended")
        assert "ps-done" not in by_id
        assert ISO.match(by_id["ps-nap"]["due_at"]) and by_id["ps-nap"]["attempts"] == 1
        assert by_id["ps-run"]["lease_holder"].startswith("pid ")
        people = shared.ys("ps")
        nap_row = next(line for line in people.stdout.splitlines() if "ps-nap" in line)
        assert "suspended" in nap_row and "in 59m" in nap_row
        run_row = next(line for line in people.stdout.splitlines() if "ps-run" in line)
        assert "running" in run_row and by_id["ps-run"]["lease_holder"] in run_row
    finally:
        gate.touch()
    wait_status(shared, "ps-run", "completed")


def test_ps_pages_its_live_executions_and_says_how_to_go_on(shared):
    naps = [f"ps-page-{i}" for i in range(5)]
    for execution_id in naps:
        admit(shared, "nap", execution_id)
        wait_status(shared, execution_id, "suspended")
    finished(shared, "hello", "ps-page-done")
    seen: list[str] = []
    args = ["ps", "--limit", "2"]
    for _ in range(10):
        out = shared.ys(*args)
        assert out.returncode == 0, out.stderr
        seen += [line.split()[0] for line in out.stdout.splitlines()[1:] if line.strip()]
        more = [line for line in out.stderr.splitlines() if line.startswith("more: ys ps")]
        if not more:
            break
        assert more[0].startswith("more: ys ps --limit 2 --page-token ")
        args = more[0].split()[2:]
    live = [
        r["execution_id"]
        for r in out_json(shared.ys("ps", "--json", "--limit", "1000"))["executions"]
    ]
    assert len(seen) == len(set(seen)) == len(live)  # every live one once, none finished
    assert set(naps) <= set(seen) and "ps-page-done" not in seen


# -- describe and history -----------------------------------------------------------------------


def test_describe_json_has_history_size_steps_children_effects_and_deliveries(shared):
    finished(shared, "hello", "rd-desc")
    d = out_json(shared.ys("describe", "rd-desc", "--json"))
    check_record(d)
    assert isinstance(d["history_length"], int) and d["history_length"] >= 4
    assert isinstance(d["history_bytes"], int) and d["history_bytes"] > 0
    assert [(s["key"], s["status"]) for s in d["steps"]] == [("greet", "completed")]
    assert d["children"] == [] and d["effects"] == []
    [delivery] = d["deliveries"]
    assert delivery["attempt"] == 1 and delivery["outcome"] == "completed"
    assert ISO.match(delivery["started_at"]) and ISO.match(delivery["ended_at"])
    people = shared.ys("describe", "rd-desc")
    assert people.returncode == 0
    for text in ("rd-desc", "Steps", "greet", "Deliveries", "completed", "history"):
        assert text in people.stdout


def test_describe_shows_the_pending_wake(shared):
    admit(shared, "nap", "rd-wake")
    wait_status(shared, "rd-wake", "suspended")
    d = out_json(shared.ys("describe", "rd-wake", "--json"))
    assert ISO.match(d["due_at"])
    assert d["deliveries"][0]["outcome"] == "suspended"
    due_row = next(
        line
        for line in shared.ys("describe", "rd-wake").stdout.splitlines()
        if line.startswith("due")
    )
    assert "(in 59m" in due_row


def test_history_json_pages_seq_from_1_admitted_first_terminal_last(shared):
    finished(shared, "hello", "rd-hist")
    whole = out_json(shared.ys("history", "rd-hist", "--json"))
    assert set(whole) == {"events", "next_page_token"} and whole["next_page_token"] is None
    events = whole["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["kind"] == "admitted" and events[-1]["kind"] == "completed"
    for e in events:
        assert set(e) == {"seq", "at", "kind", "data"} and ISO.match(e["at"])
    first = out_json(shared.ys("history", "rd-hist", "--limit", "2", "--json"))
    assert first["events"] == events[:2]
    rest = out_json(
        shared.ys("history", "rd-hist", "--page-token", first["next_page_token"], "--json")
    )
    assert rest["events"] == events[2:]
    people = shared.ys("history", "rd-hist", "--limit", "2")
    assert "admitted" in people.stdout and "completed" not in people.stdout
    assert f"--limit 2 --page-token {first['next_page_token']}" in people.stderr


# -- workflows and wake -------------------------------------------------------------------------


def test_workflows_json_lists_the_scripts_with_load_errors(shared):
    shared.write("broken.py", "def main(:\n")
    listing = wait_until(
        lambda: (
            (w := out_json(shared.ys("workflows", "--json")))
            and any(x["name"] == "broken" for x in w["workflows"])
            and w
        )
    )
    assert set(listing) == {"workflows"}
    by_name = {w["name"]: w for w in listing["workflows"]}
    for w in by_name.values():
        assert {"name", "kind", "path", "error"} <= set(w)
    assert by_name["hello"]["error"] is None and by_name["hello"]["path"].endswith("hello.py")
    assert by_name["broken"]["error"]
    people = shared.ys("workflows")
    broken_row = next(line for line in people.stdout.splitlines() if line.startswith("broken"))
    assert "SyntaxError" in broken_row or "syntax" in broken_row.lower()


def test_wake_makes_a_suspended_execution_due_now_and_ignores_a_finished_one(shared):
    admit(shared, "nap", "rd-nudge")
    wait_status(shared, "rd-nudge", "suspended")
    assert out_json(shared.ys("wake", "rd-nudge", "--json")) == {
        "execution_id": "rd-nudge",
        "status": "requested",
    }
    wait_until(
        lambda: shared.client().get("rd-nudge")["attempts"] == 2, message="a second delivery"
    )
    finished(shared, "hello", "rd-woken-done")
    people = shared.ys("wake", "rd-woken-done")
    assert people.returncode == 0 and "nothing to wake" in people.stderr
    assert shared.ys("wake", "nobody").returncode == 4


def test_ids_and_values_that_look_like_markup_are_shown_as_they_are(shared):
    finished(shared, "hello", "odd-[red]x[/]", name="[bold]y[/bold]")
    people = shared.ys("get", "odd-[red]x[/]")
    assert people.returncode == 0, people.stderr
    assert "odd-[red]x[/]" in people.stdout and "[bold]y[/bold]" in people.stdout
    listed = shared.ys("list", "--workflow", "hello", "--limit", "1000")
    assert "odd-[red]x[/]" in listed.stdout
