"""Long IDs in tables: `ys ps` and `ys list` cut an ID past 64 characters in the middle with
an ellipsis (both ends stay), so one 256-character ID does not pad every row past 256 columns;
--json and `ys get` keep it whole. And ys.Client's reads take what trigger() returns."""

from __future__ import annotations

import pytest
from cli_support import out_json, wait_status

LONG = "batch-" + "x" * 236 + "-tail-42"  # 250 characters (a log folder name fits 255 bytes)


@pytest.fixture(scope="module")
def long_one(shared):
    with shared.client() as c:
        c.trigger("nap", {}, execution_id=LONG)
    wait_status(shared, LONG, "suspended")
    return shared


@pytest.mark.parametrize("args", [["ps"], ["list", "--workflow", "nap"]])
def test_a_long_id_is_cut_in_tables_and_no_row_is_padded_past_it(long_one, args):
    result = long_one.ys(*args)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    [row] = [line for line in lines if line.startswith("batch-")]
    cell = row.split()[0]
    assert cell.startswith("batch-xxx") and cell.endswith("-tail-42") and "…" in cell
    assert len(cell) == 64
    assert max(len(line) for line in lines) < 160, "rows padded to the long ID"


@pytest.mark.parametrize("args", [["ps", "--json"], ["list", "--workflow", "nap", "--json"]])
def test_json_keeps_the_whole_id(long_one, args):
    ids = [r["execution_id"] for r in out_json(long_one.ys(*args))["executions"]]
    assert LONG in ids


def test_the_client_reads_take_the_dict_trigger_returns(shared):
    with shared.client() as c:
        admitted = c.trigger("hello", {"name": "dict"}, execution_id="client-dict-1")
        record = c.wait(admitted, timeout=20)
        assert record["status"] == "completed"
        assert c.get(admitted) == c.get("client-dict-1")
        assert c.history(admitted)["events"][0]["kind"] == "admitted"


@pytest.mark.parametrize(
    "bad,says", [(42, "not by int"), ({"id": "x"}, '"execution_id"'), (None, "not by NoneType")]
)
def test_the_client_refuses_other_types_with_a_message_that_says_what_it_takes(shared, bad, says):
    with shared.client() as c, pytest.raises(TypeError, match=says) as info:
        c.wait(bad, timeout=1)
    assert "trigger()" in str(info.value)
