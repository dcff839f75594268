"""Delivery logs (one file per attempt) and execution IDs that look like paths."""

from __future__ import annotations

import json
import os
from urllib.parse import quote

import pytest
from e2e_support import fixture_dir, kinds, lines, write_workflow

pytestmark = pytest.mark.e2e

CHATTY = """
@ys.workflow
def main(step, params):
    print("out of attempt", step.attempt, "of", step.execution_id, flush=True)
    print("err of attempt", step.attempt, file=sys.stderr, flush=True)
    if step.attempt == 1:
        os._exit(3)  # no outcome: delivered again, into a new log file
    return step.run("work", note, params["d"], "work")
"""


def _files_under(folder):
    return sorted(
        os.path.relpath(os.path.join(root, f), folder)
        for root, _, files in os.walk(folder)
        for f in files
    )


def test_each_delivery_attempt_logs_its_stdout_and_stderr_to_its_own_file(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "chatty", CHATTY)
    c = daemon.client()
    c.trigger("chatty", {"d": str(fx)}, execution_id="chatty-1")
    assert c.wait("chatty-1", timeout=20)["status"] == "completed"

    folder = daemon.home / "logs" / "chatty-1"
    assert _files_under(folder) == ["1.log", "1.times", "2.log", "2.times"]  # log, line times
    first = (folder / "1.log").read_text()
    second = (folder / "2.log").read_text()
    assert "out of attempt 1 of chatty-1" in first and "err of attempt 1" in first
    assert "out of attempt 2 of chatty-1" in second and "err of attempt 2" in second
    assert "attempt 2" not in first and "attempt 1" not in second
    assert lines(fx) == ["work"]


def test_execution_id_with_slashes_works_end_to_end_and_its_logs_stay_inside_logs(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "chatty", CHATTY)
    c = daemon.client()
    ids = ["corpus/tinystories/v1", "../../outside", "a%2Fb?c#d"]
    for execution_id in ids:
        assert c.trigger("chatty", {"d": str(fx)}, execution_id=execution_id) == {
            "execution_id": execution_id,
            "started": True,
        }
    for execution_id in ids:
        record = c.wait(execution_id, timeout=20)
        assert record["execution_id"] == execution_id
        assert record["outcome"] == {"status": "completed", "result": "work"}
        assert c.get(execution_id)["execution_id"] == execution_id
        assert c.describe(execution_id)["steps"][0]["key"] == "work"
        assert kinds(c, execution_id)[0] == "admitted"
        assert c.wake(execution_id) == {"status": "ignored"}
    listed = {r["execution_id"] for r in c.list(workflow="chatty")["executions"]}
    assert listed == set(ids)

    logs = daemon.home / "logs"
    assert sorted(os.listdir(logs)) == sorted(quote(i, safe="") for i in ids)
    for execution_id in ids:
        folder = logs / quote(execution_id, safe="")
        assert _files_under(folder) == ["1.log", "1.times", "2.log", "2.times"]  # log, line times
        assert f"of {execution_id}" in (folder / "2.log").read_text()
    # nothing was written anywhere else in the home (scripts/ holds script versions, named
    # by their hash: no execution ID reaches it; code/ their compiled code, likewise;
    # daemon-id the daemon's ID)
    outside = [
        f
        for f in _files_under(daemon.home)
        if not f.startswith(
            (
                "logs/",
                "workflows/",
                "run/",
                "ys.db",
                "daemon-test.log",
                "scripts/",
                "code/",
                "daemon-id",
            )
        )
    ]
    assert outside == []
    assert not (tmp_path / "outside").exists()
    assert lines(fx) == ["work"] * len(ids)


def test_dot_and_dot_dot_execution_ids_keep_their_logs_in_their_own_folder(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "chatty", CHATTY)
    c = daemon.client()
    for execution_id in ("..", "."):
        c.trigger("chatty", {"d": str(fx)}, execution_id=execution_id)
        assert c.wait(execution_id, timeout=20)["status"] == "completed"
    logs = daemon.home / "logs"
    assert not (daemon.home / "1.log").exists()
    assert not (logs / "1.log").exists()
    assert len([p for p in logs.iterdir() if p.is_dir()]) == 2


LONG_IDS = ["a" * 256, "/" * 100, "日" * 85]  # each encodes to a name over 255 bytes


def test_ids_whose_encoded_name_is_over_255_bytes_run_and_show_their_logs(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    write_workflow(daemon, "chatty", CHATTY)
    c = daemon.client()
    for execution_id in LONG_IDS:
        c.trigger("chatty", {"d": str(fx)}, execution_id=execution_id)
    for execution_id in LONG_IDS:
        record = c.wait(execution_id, timeout=30)
        assert record["outcome"] == {"status": "completed", "result": "work"}
        assert record["attempts"] == 2
        shown = daemon.ys("logs", execution_id, "--json")
        assert shown.returncode == 0, shown.stderr
        texts = [entry["text"] for entry in json.loads(shown.stdout)["logs"]]
        assert len(texts) == 2 and f"out of attempt 2 of {execution_id}" in texts[1]

    logs = daemon.home / "logs"
    names = os.listdir(logs)
    assert len(names) == len(LONG_IDS)
    assert all(len(os.fsencode(n)) <= 255 for n in names)
    # readable: each name starts with its encoded ID
    assert sorted(n[:30] for n in names) == sorted(quote(i, safe="")[:30] for i in LONG_IDS)

    pruned = daemon.ys("gc", "--older-than", "0", "--json")
    assert pruned.returncode == 0, pruned.stderr
    assert sorted(json.loads(pruned.stdout)["pruned"]) == sorted(LONG_IDS)
    assert os.listdir(logs) == []


def test_short_ids_keep_their_log_folder_name_and_long_ones_never_collide(tmp_path):
    from ys.contract import slot_id
    from ys.paths import Paths

    paths = Paths(tmp_path, tmp_path, tmp_path, tmp_path / "ys.db", tmp_path, tmp_path / "s")
    short = "x" * 255
    assert paths.log_dir(short).name == short
    assert paths.log_dir("corpus/tinystories/v1").name == "corpus%2Ftinystories%2Fv1"
    near = ["b" * 300, "b" * 300 + "c", "b" * 299 + "c"]
    names = {paths.log_dir(i).name for i in near}
    assert len(names) == 3 and all(len(n) <= 255 for n in names)
    # a schedule named with 100 slashes fires IDs that must fit too
    fired = slot_id("/" * 100, 1_800_000_000)
    assert len(paths.log_dir(fired).name) <= 255
    assert paths.log_dir(fired) != paths.log_dir(slot_id("/" * 100, 1_800_000_060))
