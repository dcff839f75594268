"""`ys backup` and `ys restore`: a checked copy of the live database, put back with the daemon
stopped; bad input is exit 2 with nothing written."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from cli_support import DaemonHandle

from tests.support import wait_until


def _done(h: DaemonHandle, eid: str) -> bool:
    r = h.ys("get", eid, "--json")
    return r.returncode == 0 and json.loads(r.stdout)["status"] == "completed"


def test_backup_while_running_then_restore_brings_it_back(fresh: DaemonHandle, tmp_path: Path):
    h = fresh
    for i in range(5):
        assert h.ys("trigger", "hello", "--id", f"kept-{i}").returncode == 0
    wait_until(lambda: all(_done(h, f"kept-{i}") for i in range(5)), timeout=60)
    target = tmp_path / "copy.db"
    r = h.ys("backup", str(target), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["path"] == str(target) and out["executions"] == 5 and out["bytes"] > 0
    with sqlite3.connect(target) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        ids = {r[0] for r in conn.execute("SELECT execution_id FROM executions")}
    assert ids == {f"kept-{i}" for i in range(5)}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".copy.db")]

    # a second backup to the same name is refused, the file untouched
    before = target.read_bytes()
    r = h.ys("backup", str(target))
    assert r.returncode == 2 and "already exists" in r.stderr, r.stderr
    assert target.read_bytes() == before

    # restore refuses while the daemon holds the database
    r = h.ys("restore", str(target))
    assert r.returncode == 3 and "stop it first" in r.stderr, r.stderr

    assert h.ys("trigger", "hello", "--id", "after-backup").returncode == 0
    wait_until(lambda: _done(h, "after-backup"), timeout=60)
    h.stop()
    r = h.ys("restore", str(target), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    aside = Path(out["kept_aside"])
    assert aside.name.startswith(h.db.name + ".before-restore-") and aside.exists()
    with sqlite3.connect(aside) as conn:
        assert conn.execute("SELECT 1 FROM executions WHERE execution_id='after-backup'").fetchone()
    h.start()
    assert _done(h, "kept-3")
    r = h.ys("get", "after-backup", "--json")
    assert r.returncode == 4  # the restored database is the one backed up


def test_restore_refuses_what_is_not_a_ys_database(autostart_home: DaemonHandle, tmp_path: Path):
    h = autostart_home
    h.env["YS_AUTOSTART"] = "0"
    db_before = h.db.exists()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all")
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as conn:
        conn.execute("CREATE TABLE executions (execution_id TEXT)")
        conn.execute("CREATE TABLE schema_migrations (version INTEGER, applied_at REAL)")
        conn.execute("INSERT INTO schema_migrations VALUES (9999, 0)")
    for bad, said in (
        (junk, "not a ys database"),
        (other, "not a ys database"),
        (newer, "newer ys"),
        (tmp_path / "missing.db", "cannot be read"),
    ):
        r = h.ys("restore", str(bad))
        assert r.returncode == 2, (bad, r.stderr)
        assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert h.db.exists() == db_before
    assert not [p for p in h.db.parent.iterdir() if "before-restore" in p.name]


def test_backup_refuses_a_folder_that_is_not_there(fresh: DaemonHandle, tmp_path: Path):
    r = fresh.ys("backup", str(tmp_path / "nowhere" / "x.db"))
    assert r.returncode == 2 and "not a folder" in r.stderr, r.stderr
    assert not (tmp_path / "nowhere").exists()
    assert os.listdir(tmp_path) == sorted(os.listdir(tmp_path))  # nothing half-written
