"""Which files in the workflows folder are workflows, and by which name: the file name without
the extension for every kind; two files with one name are both broken; only regular files are
scripts (a FIFO freezes nothing); a folder fixed with chmod is re-checked without a touch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from e2e_support import events, fixture_dir, lines, wait_until, write_workflow

from tests.support import make_home

pytestmark = pytest.mark.e2e

NOTE = """
@ys.workflow
def main(step, params):
    return step.run("work", note, params["d"], "{what}")
"""


def _all(client) -> list[dict]:
    return client.workflows()["workflows"]


def _listed(client, name: str) -> dict | None:
    return {w["name"]: w for w in _all(client)}.get(name)


def _released(client, execution_id: str) -> list[dict]:
    return [e["data"] for e in events(client, execution_id) if e["kind"] == "released"]


def test_a_shell_workflow_is_named_by_its_file_name_without_the_extension(daemon):
    daemon.write("backup.sh", "#!/bin/sh\necho backed up\n", mode=0o700)
    daemon.write("tidy", "#!/bin/sh\necho tidied\n", mode=0o700)  # no extension: kept
    c = daemon.client()
    wait_until(lambda: _listed(c, "backup") and _listed(c, "tidy"), message="both listed")
    backup = _listed(c, "backup")
    assert (backup["kind"], backup["path"], backup["error"]) == (
        "shell",
        str(daemon.workflows / "backup.sh"),
        None,
    )
    assert _listed(c, "backup.sh") is None
    done = c.wait(c.trigger("backup")["execution_id"], timeout=30)
    assert done["outcome"] == {
        "status": "completed",
        "result": {"exit_status": 0, "last_line": "backed up"},
    }
    assert c.wait(c.trigger("tidy")["execution_id"], timeout=30)["outcome"]["status"] == (
        "completed"
    )
    old_name = daemon.ys("trigger", "backup.sh")
    assert old_name.returncode == 4 and old_name.stderr.startswith("WORKFLOW_NOT_FOUND: ")


def test_two_files_with_one_name_are_both_listed_with_an_error_and_neither_runs(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    daemon.write("backup.sh", "#!/bin/sh\necho from shell\n", mode=0o700)
    write_workflow(daemon, "backup", NOTE.format(what="python"))
    c = daemon.client()

    def both() -> list[dict]:
        found = [w for w in _all(c) if w["name"] == "backup"]
        return found if len(found) == 2 and all(w["error"] for w in found) else []

    found = wait_until(both, message="both files listed with an error")
    assert sorted(Path(w["path"]).name for w in found) == ["backup.py", "backup.sh"]
    assert all("2 files are named backup" in w["error"] for w in found)

    c.trigger("backup", {"d": str(fx)}, execution_id="backup-1")
    wait_until(lambda: _released(c, "backup-1"), message="the delivery to give up")
    assert _released(c, "backup-1")[0]["reason"] == "workflow_unavailable"
    assert c.get("backup-1")["status"] == "admitted" and lines(fx) == []

    (daemon.workflows / "backup.sh").unlink()  # one name, one file: it runs
    done = c.wait("backup-1", timeout=30)
    assert done["outcome"] == {"status": "completed", "result": "python"}
    assert _listed(c, "backup")["error"] is None and lines(fx) == ["python"]


def test_a_group_writable_notes_file_does_not_shadow_a_workflow_of_its_name(daemon, tmp_path):
    """backup.md, 0664 (umask 002), is no script at all: backup.py keeps running."""
    fx = fixture_dir(tmp_path)
    daemon.write("notes-shadow.md", "what this workflow does\n", mode=0o664)  # first
    write_workflow(daemon, "notes-shadow", NOTE.format(what="python"))
    c = daemon.client()
    wait_until(lambda: _listed(c, "notes-shadow"), message="notes-shadow.py listed")
    c.trigger("notes-shadow", {"d": str(fx)}, execution_id="shadow-1")
    done = c.wait("shadow-1", timeout=30)
    assert done["outcome"] == {"status": "completed", "result": "python"}
    assert [w["path"] for w in _all(c) if w["name"] == "notes-shadow"] == [
        str(daemon.workflows / "notes-shadow.py")
    ]
    assert _listed(c, "notes-shadow")["error"] is None


def test_an_execution_stored_under_a_shell_scripts_file_name_still_runs(tmp_path):
    """ys named shell workflows by their file name before (backup.sh): an execution stored
    then (admitted here through the store, as the older daemon did) still finds its script."""
    from ys.store.sqlite import SqliteStore

    fx = fixture_dir(tmp_path)
    with make_home(tmp_path) as h:
        h.write("old-name.sh", f"#!/bin/sh\necho ran >> {fx}/old-name\n", mode=0o700)
        store = SqliteStore(str(h.db))
        try:
            store.admit("old-name.sh", {}, execution_id="old-name-1")
        finally:
            store.close()
        h.start()
        done = h.client().wait("old-name-1", timeout=30)
        assert done["outcome"]["status"] == "completed", done
        assert (fx / "old-name").read_text() == "ran\n"


def _fifo(path: Path) -> None:
    os.mkfifo(path)
    os.chmod(path, 0o700)  # executable: it would pass for a shell script


def test_a_fifo_in_the_folder_is_no_script_and_freezes_nothing(ys_home, tmp_path):
    fx = fixture_dir(tmp_path)
    _fifo(ys_home.workflows / "pipe")
    _fifo(ys_home.workflows / "pipe.py")
    write_workflow(ys_home, "hello", NOTE.format(what="hello"))
    daemon = ys_home.start()  # before the fix it never answered: the load read the FIFO
    c = daemon.client(timeout=10)
    assert [w["name"] for w in _all(c)] == ["hello"]

    _fifo(daemon.workflows / "later-pipe")  # while it runs: the watcher sees it, reads nothing
    write_workflow(daemon, "latecomer", NOTE.format(what="late"))
    wait_until(lambda: _listed(c, "latecomer"), message="the script after the FIFO")
    assert [w["name"] for w in _all(c)] == ["hello", "latecomer"]
    done = c.wait(c.trigger("latecomer", {"d": str(fx)})["execution_id"], timeout=30)
    assert done["outcome"]["result"] == "late"


def test_a_folder_fixed_with_chmod_is_rechecked_and_its_waiting_execution_runs(daemon, tmp_path):
    fx = fixture_dir(tmp_path)
    c = daemon.client()
    os.chmod(daemon.workflows, 0o770)
    write_workflow(daemon, "guarded", NOTE.format(what="ran"))
    wait_until(
        lambda: "writable by others" in ((_listed(c, "guarded") or {}).get("error") or ""),
        message="the unsafe folder listed",
    )
    c.trigger("guarded", {"d": str(fx)}, execution_id="guarded-1")
    wait_until(lambda: _released(c, "guarded-1"), message="the delivery to give up")

    os.chmod(daemon.workflows, 0o700)  # what the error says to do; the script is not touched
    done = c.wait("guarded-1", timeout=30)
    assert done["outcome"] == {"status": "completed", "result": "ran"}
    assert _listed(c, "guarded")["error"] is None and lines(fx) == ["ran"]
