"""`ys cancel`, `ys list --parent` and describe's children and waits, `ys effects` / `ys effect`,
and `ys store put|get|ls|rm`: exit codes, the JSON shapes of docs/API.md, what people see, and
an approval that goes through the command line only."""

from __future__ import annotations

import json

import pytest
from cli_support import ISO, admit, one_error_line, out_json, wait_status, wait_until

APPROVE = """
    import ys

    @ys.workflow
    def main(step, params):
        approved = step.wait_for("approval", "approve/order-42")
        return {"approved": approved}
"""

# Starts two children of `hello`, the second detached; returns their IDs.
PARENT = """
    import ys

    @ys.workflow
    def main(step, params):
        first = step.start("first", "hello", params={"name": "a"})
        second = step.start("second", "hello", params={"name": "b"}, detached=True)
        return [first, second]
"""

# One effect per run; with params["fail"] its perform raises, so the effect stays pending and
# the execution waits on it (retry_in is an hour: it stays that way for the test).
PAY = """
    import ys

    @ys.workflow
    def main(step, params):
        def perform(effect_id):
            if params.get("fail"):
                raise RuntimeError("provider down")
            return {"charge": effect_id}

        return step.effect("charge", effect_id=params["effect"], operation="charge.v1",
                           input={"amount": 5}, perform=perform,
                           lookup=lambda effect_id: ys.Unknown(), retry_in=3600)
"""

EFFECT_FIELDS = {"effect_id", "operation", "status", "result", "conflicts"}


@pytest.fixture(scope="module")
def wf(shared):
    """The shared daemon with this module's workflows loaded."""
    for name, source in (("approve.py", APPROVE), ("parent.py", PARENT), ("pay.py", PAY)):
        shared.write(name, source)

    def loaded() -> bool:
        names = {w["name"] for w in shared.client(timeout=5).workflows()["workflows"]}
        return {"approve", "parent", "pay"} <= names

    wait_until(loaded, message="approve, parent and pay to load")
    return shared


def finished(daemon, workflow: str, execution_id: str, **params: object) -> dict:
    admit(daemon, workflow, execution_id, **params)
    return wait_status(daemon, execution_id, "completed", "failed")


# -- cancel -------------------------------------------------------------------------------------


def test_cancel_of_a_suspended_sleeper_stops_it_as_cancelled(wf):
    admit(wf, "nap", "cx-nap")
    wait_status(wf, "cx-nap", "suspended")
    result = wf.ys("cancel", "cx-nap")
    assert result.returncode == 0, result.stderr
    assert "cancellation requested for cx-nap (it stops at its next step)" in result.stderr
    assert result.stdout == ""
    waited = wf.ys("wait", "cx-nap", "--json")
    assert waited.returncode == 1, waited.stderr
    record = json.loads(waited.stdout)
    assert record["status"] == "cancelled" and record["outcome"] == {"status": "cancelled"}
    again = out_json(wf.ys("cancel", "cx-nap", "--json"))
    assert (again["status"], again["changed"]) == ("cancelled", False)


def test_cancel_of_a_finished_execution_changes_nothing_and_says_so(wf):
    before = finished(wf, "hello", "cx-done")
    people = wf.ys("cancel", "cx-done")
    assert (people.returncode, people.stdout) == (0, "")
    assert "cx-done is already completed; nothing changed" in people.stderr
    record = out_json(wf.ys("cancel", "cx-done", "--json"))
    assert record["changed"] is False
    assert record["status"] == "completed" and record["outcome"] == before["outcome"]
    assert record["execution_id"] == "cx-done" and ISO.match(record["updated_at"])


def test_cancel_of_an_unknown_execution_exits_4(wf):
    result = wf.ys("cancel", "cx-nobody")
    assert (result.returncode, result.stdout) == (4, "")
    assert "cx-nobody" in one_error_line(result, "EXECUTION_NOT_FOUND")


# -- children: list --parent and describe -------------------------------------------------------


def test_list_parent_shows_only_its_children_and_describe_shows_them(wf):
    finished(wf, "hello", "pc-bystander")
    parent = finished(wf, "parent", "pc-parent")
    assert parent["status"] == "completed", parent
    first, second = parent["outcome"]["result"]
    for child in (first, second):
        wait_status(wf, child, "completed")

    page = out_json(wf.ys("list", "--parent", "pc-parent", "--json"))
    assert sorted(r["execution_id"] for r in page["executions"]) == sorted([first, second])
    for r in page["executions"]:
        assert r["parent"]["execution_id"] == "pc-parent"
    people = wf.ys("list", "--parent", "pc-parent")
    assert people.returncode == 0, people.stderr
    assert first in people.stdout and second in people.stdout
    assert "pc-parent" not in people.stdout and "pc-bystander" not in people.stdout
    none = wf.ys("list", "--parent", "pc-bystander")
    assert (none.returncode, none.stdout) == (0, "") and "no executions match" in none.stderr

    d = out_json(wf.ys("describe", "pc-parent", "--json"))
    by_id = {c["execution_id"]: c for c in d["children"]}
    assert by_id[first] == {
        "execution_id": first,
        "workflow": "hello",
        "status": "completed",
        "step_key": "first",
        "detached": False,
    }
    assert by_id[second]["detached"] is True and by_id[second]["step_key"] == "second"
    shown = wf.ys("describe", "pc-parent")
    assert shown.returncode == 0, shown.stderr
    assert "Children" in shown.stdout
    row = next(line for line in shown.stdout.splitlines() if line.startswith(second))
    assert "hello" in row and "completed" in row and "second" in row and "yes" in row
    child = wf.ys("describe", first)
    assert "pc-parent (child, step first)" in child.stdout


# -- effects ------------------------------------------------------------------------------------


def test_effects_and_effect_show_the_ledger_with_conflict_reports(wf):
    settled = finished(wf, "pay", "ef-settled", effect="cli:charge:settled")
    assert settled["outcome"]["result"] == {"charge": "cli:charge:settled"}
    admit(wf, "pay", "ef-pending", effect="cli:charge:pending", fail=True)
    wait_status(wf, "ef-pending", "suspended")
    # Another runtime settles the settled effect again with another result: a conflict report.
    with wf.client() as c:
        answer = c._call(
            "POST",
            "/v1/effects/cli:charge:settled/settle",
            {"operation": "charge.v1", "result": '{"charge":"other"}'},
        )
    assert answer["status"] == "conflict"

    listing = out_json(wf.ys("effects", "--json"))
    assert set(listing) == {"effects"}
    for e in listing["effects"]:
        assert EFFECT_FIELDS <= set(e), e
        assert isinstance(e["conflicts"], list)
    by_id = {e["effect_id"]: e for e in listing["effects"]}
    s, p = by_id["cli:charge:settled"], by_id["cli:charge:pending"]
    assert (s["operation"], s["status"], s["result"]) == (
        "charge.v1",
        "settled",
        {"charge": "cli:charge:settled"},
    )
    assert [(x["result"], x["conflicting_result"]) for x in s["conflicts"]] == [
        ({"charge": "cli:charge:settled"}, {"charge": "other"})
    ]
    assert (p["status"], p["result"], p["conflicts"]) == ("pending", None, [])

    def ids(status: str) -> set[str]:
        page = out_json(wf.ys("effects", "--status", status, "--json"))
        return {e["effect_id"] for e in page["effects"]}

    assert "cli:charge:pending" in ids("pending") and "cli:charge:settled" not in ids("pending")
    assert "cli:charge:settled" in ids("settled") and "cli:charge:pending" not in ids("settled")
    assert "cli:charge:settled" in ids("conflict") and "cli:charge:pending" not in ids("conflict")
    bad = wf.ys("effects", "--status", "lost")
    assert bad.returncode == 2
    one_error_line(bad, "INVALID_ARGUMENT")

    table = wf.ys("effects")
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if "cli:charge:settled" in line)
    assert "charge.v1" in row and "1 conflict" in row and row.rstrip().endswith("1")

    one = out_json(wf.ys("effect", "cli:charge:settled", "--json"))
    assert EFFECT_FIELDS | {"input", "began_by", "waiters"} <= set(one)
    assert one["input"] == {"amount": 5}
    assert [(b["execution_id"], b["step_key"]) for b in one["began_by"]] == [
        ("ef-settled", "charge")
    ]
    pending = out_json(wf.ys("effect", "cli:charge:pending", "--json"))
    assert [(w["execution_id"], w["step_key"]) for w in pending["waiters"]] == [
        ("ef-pending", "charge")
    ]
    assert ISO.match(pending["waiters"][0]["wake_at"])

    people = wf.ys("effect", "cli:charge:settled")
    assert people.returncode == 0, people.stderr
    for text in (
        "charge.v1",
        '{"amount": 5}',
        "Began by",
        "ef-settled",
        "Conflicts",
        '{"charge": "other"}',
    ):
        assert text in people.stdout, text


def test_describe_timeline_draws_deliveries_steps_and_children(wf):
    parent = finished(wf, "parent", "tl-parent")
    first, second = parent["outcome"]["result"]
    for child in (first, second):
        wait_status(wf, child, "completed")
    t = out_json(wf.ys("describe", "tl-parent", "--timeline", "--json"))
    assert t["execution_id"] == "tl-parent" and t["status"] == "completed"
    kinds = [r["kind"] for r in t["rows"]]
    assert kinds[0] == "delivery" and kinds.count("child") == 2
    assert {r["link"] for r in t["rows"] if r["kind"] == "child"} == {first, second}
    assert {"first", "second"} <= {r["label"] for r in t["rows"] if r["kind"] == "step"}
    for r in t["rows"]:
        for b in r["bars"]:
            assert 0 <= b["x0"] <= b["x1"] <= 1 and ISO.match(b["start"]), b
    people = wf.ys("describe", "tl-parent", "--timeline")
    assert people.returncode == 0, people.stderr
    assert "tl-parent timeline" in people.stdout and "delivery 1" in people.stdout
    assert f"↳ {first}" in people.stdout and "█" in people.stdout
    missing = wf.ys("describe", "tl-no-such", "--timeline")
    assert (missing.returncode, missing.stdout) == (4, "")
    one_error_line(missing, "EXECUTION_NOT_FOUND")


def test_describe_shows_the_effects_an_execution_waits_on(wf):
    admit(wf, "pay", "ef-waits", effect="cli:charge:waits", fail=True)
    wait_status(wf, "ef-waits", "suspended")
    d = out_json(wf.ys("describe", "ef-waits", "--json"))
    assert [e["effect_id"] for e in d["effects"]] == ["cli:charge:waits"]
    [w] = d["waiting_on"]
    assert (w["kind"], w["effect_id"], w["step_key"]) == ("effect", "cli:charge:waits", "charge")
    people = wf.ys("describe", "ef-waits").stdout
    assert "Waiting on" in people and "Effects" in people
    assert "cli:charge:waits" in people and "pending" in people


def test_effect_not_found_exits_4(wf):
    result = wf.ys("effect", "cli:no-such-effect")
    assert (result.returncode, result.stdout) == (4, "")
    assert "`ys effects`" in one_error_line(result, "NOT_FOUND")


# -- store --------------------------------------------------------------------------------------


def test_store_put_get_ls_rm_round_trip_with_the_json_shapes(wf):
    put = out_json(wf.ys("store", "put", "rt/a", '{"a": 1}', "--json"))
    assert set(put) == {"key", "version", "updated_at", "woken"}
    assert (put["key"], put["version"], put["woken"]) == ("rt/a", 1, 0)
    assert ISO.match(put["updated_at"])
    got = out_json(wf.ys("store", "get", "rt/a", "--json"))
    assert got == {"key": "rt/a", "value": {"a": 1}, "version": 1, "updated_at": put["updated_at"]}
    out_json(wf.ys("store", "put", "rt/b", "x", "--json"))
    out_json(wf.ys("store", "put", "other", "y", "--json"))

    listing = out_json(wf.ys("store", "ls", "rt/", "--json"))
    assert listing == {
        "entries": [
            {"key": "rt/a", "version": 1, "updated_at": put["updated_at"]},
            {"key": "rt/b", "version": 1, "updated_at": listing["entries"][1]["updated_at"]},
        ]
    }
    table = wf.ys("store", "ls", "rt/")
    assert table.returncode == 0 and "rt/a" in table.stdout and "other" not in table.stdout

    removed = out_json(wf.ys("store", "rm", "rt/a", "--json"))
    assert removed == {"key": "rt/a", "deleted": True}
    assert [e["key"] for e in out_json(wf.ys("store", "ls", "rt/", "--json"))["entries"]] == [
        "rt/b"
    ]
    people = wf.ys("store", "rm", "rt/b")
    assert people.returncode == 0 and "removed rt/b" in people.stderr
    empty = wf.ys("store", "ls", "rt/")
    assert (empty.returncode, empty.stdout) == (0, "") and "no keys" in empty.stderr
    for args in (("store", "get", "rt/a"), ("store", "rm", "rt/a")):
        missing = wf.ys(*args)
        assert (missing.returncode, missing.stdout) == (4, ""), args
        assert "`ys store ls`" in one_error_line(missing, "NOT_FOUND")


def test_store_put_parses_values_as_json_or_strings_files_and_stdin(wf, tmp_path):
    def value(key: str) -> object:
        return out_json(wf.ys("store", "get", key, "--json"))["value"]

    people = wf.ys("store", "put", "pv/flag", "true")
    assert people.returncode == 0, people.stderr
    assert people.stdout.strip() == "pv/flag = version 1 (woke 0 waiting executions)"
    assert value("pv/flag") is True
    wf.ys("store", "put", "pv/n", "42")
    assert value("pv/n") == 42
    wf.ys("store", "put", "pv/word", "hello")
    assert value("pv/word") == "hello"
    doc = tmp_path / "doc.json"
    doc.write_text('{"approved": true, "by": "ann"}')
    assert wf.ys("store", "put", "pv/file", f"@{doc}").returncode == 0
    assert value("pv/file") == {"approved": True, "by": "ann"}
    assert wf.ys("store", "put", "pv/stdin", "-", input="[1, 2]").returncode == 0
    assert value("pv/stdin") == [1, 2]

    # For people, `store get` prints the value alone: strings raw, anything else as JSON.
    assert wf.ys("store", "get", "pv/word").stdout == "hello\n"
    assert wf.ys("store", "get", "pv/flag").stdout == "true\n"
    assert wf.ys("store", "get", "pv/file").stdout == '{"approved": true, "by": "ann"}\n'

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    refused = wf.ys("store", "put", "pv/bad", f"@{bad}")
    assert refused.returncode == 2
    assert "VALUE from" in one_error_line(refused, "INVALID_ARGUMENT")
    assert wf.ys("store", "get", "pv/bad").returncode == 4


def test_store_put_expect_version_refuses_a_stale_version_and_changes_nothing(wf):
    assert wf.ys("store", "put", "ev/k", "one", "--expect-version", "0").returncode == 0
    out_json(wf.ys("store", "put", "ev/k", "two", "--expect-version", "1", "--json"))
    stale = wf.ys("store", "put", "ev/k", "three", "--expect-version", "1")
    assert (stale.returncode, stale.stdout) == (3, "")
    one_error_line(stale, "VERSION_CONFLICT")
    got = out_json(wf.ys("store", "get", "ev/k", "--json"))
    assert (got["value"], got["version"]) == ("two", 2)
    exists = wf.ys("store", "put", "ev/k", "four", "--expect-version", "0")
    assert exists.returncode == 3


def test_store_get_of_a_missing_key_exits_4(wf):
    result = wf.ys("store", "get", "no/such/key")
    assert (result.returncode, result.stdout) == (4, "")
    one_error_line(result, "NOT_FOUND")


# -- an approval through the command line -------------------------------------------------------


def test_an_approval_flow_through_the_command_line(wf):
    execution_id = wf.ys("trigger", "approve").stdout.strip()
    assert execution_id
    wait_status(wf, execution_id, "suspended")
    d = out_json(wf.ys("describe", execution_id, "--json"))
    assert [(w["kind"], w["key"], w["step_key"]) for w in d["waiting_on"]] == [
        ("store", "approve/order-42", "approval")
    ]
    shown = wf.ys("describe", execution_id).stdout
    assert "Waiting on" in shown and "approve/order-42" in shown

    put = wf.ys("store", "put", "approve/order-42", "true")
    assert put.returncode == 0, put.stderr
    assert put.stdout.strip() == "approve/order-42 = version 1 (woke 1 waiting execution)"
    waited = wf.ys("wait", execution_id, "--json", "--timeout", "30")
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["outcome"] == {
        "status": "completed",
        "result": {"approved": True},
    }
