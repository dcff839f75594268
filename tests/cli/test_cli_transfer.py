"""`ys export` and `ys import` on SQLite: every record out as checked JSON lines and back into
another home, idempotent (a second import skips everything, another history is a conflict
named on stderr, exit 3); bad input (a line cut short or edited, an unknown or newer format,
a file cut at a line's end) is exit 2 with nothing written. Into PostgreSQL and back:
tests/postgres/test_pg_transfer.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cli_support import DaemonHandle, one_error_line, wait_status
from cli_support import make_home as _make_home

from ys.store.protocols import ExecutionLine
from ys.store.sql.transfer import PARTS
from ys.store.sql.transfer_lines import encode


def make_home(root: Path) -> DaemonHandle:
    root.mkdir()
    return _make_home(root)


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def _executions(db: Path) -> list[str]:
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return sorted(r[0] for r in conn.execute("SELECT execution_id FROM executions"))


@pytest.fixture
def exported(tmp_path: Path) -> tuple[DaemonHandle, str]:
    """A stopped home with executions of every ending, a sleeping one, a value and a
    schedule; its export (taken while its daemon ran)."""
    with make_home(tmp_path / "a") as h:
        h.start()
        c = h.client()
        c.trigger("hello", {}, execution_id="done-1")
        c.trigger("boom", {}, execution_id="failed-1")
        c.trigger("nap", {"seconds": 6}, execution_id="nap-1")  # wakes after the move
        c.store_put("config/limit", '{"max": 3}')
        assert h.ys("schedule", "add", "nightly", "hello", "--cron", "0 3 * * *").returncode == 0
        wait_status(h, "done-1", "completed")
        wait_status(h, "failed-1", "failed")
        wait_status(h, "nap-1", "suspended")
        r = h.ys("export")
        assert r.returncode == 0, r.stderr
        assert "3 executions" in r.stderr and "1 values" in r.stderr, r.stderr
        # into a SQLite file whose daemon runs: refused, nothing written
        (tmp_path / "x.jsonl").write_text(r.stdout)
        again = h.ys("import", str(tmp_path / "x.jsonl"))
        assert again.returncode == 3 and "stop it first" in again.stderr, again.stderr
        # nor is a migration out of it while its daemon runs (it would run what moves twice)
        moved = h.ys("migrate", "--to", str(tmp_path / "other.db"))
        assert moved.returncode == 3 and "stop it first" in moved.stderr, moved.stderr
        assert not (tmp_path / "other.db").exists()
        h.stop()
        yield h, r.stdout


def test_export_then_import_into_another_home_gives_the_same_lines(exported, tmp_path: Path):
    h, text = exported
    lines = _lines(text)
    assert lines[0] == {**lines[0], "kind": "header", "format": "ys-export", "version": 1}
    assert lines[-1]["kind"] == "end"
    assert lines[-1]["counts"] == {
        "script": 5,
        "value": 1,
        "effect": 0,
        "schedule": 1,
        "execution": 3,
    }
    nap = next(
        x for x in lines if x["kind"] == "execution" and x["execution"]["execution_id"] == "nap-1"
    )
    assert [s["key"] for s in nap["steps"]] == ["nap"] and nap["steps"][0]["wake_at"] is not None
    schedule = next(x for x in lines if x["kind"] == "schedule")
    assert schedule["name"] == "nightly" and schedule["cursor"] > 0

    with make_home(tmp_path / "b") as b:
        src = tmp_path / "a.jsonl"
        src.write_text(text)
        r = b.ys("import", str(src), "--json")
        assert r.returncode == 0, r.stderr
        counts = json.loads(r.stdout)["counts"]
        assert counts["execution"] == {"imported": 3, "skipped": 0, "conflicts": 0}
        assert counts["value"]["imported"] == counts["schedule"]["imported"] == 1
        out = b.ys("export")
        assert out.returncode == 0, out.stderr
        assert sorted(out.stdout.splitlines()) == sorted(text.splitlines())

        # again, from stdin: everything is there already
        r = b.ys("import", "-", "--json", input=text)
        assert r.returncode == 0, r.stderr
        counts = json.loads(r.stdout)["counts"]
        assert counts["execution"] == {"imported": 0, "skipped": 3, "conflicts": 0}
        assert sum(c["imported"] for c in counts.values()) == 0

        # the imported home runs on: the sleeping one wakes when due and finishes
        b.start()
        done = wait_status(b, "nap-1", "completed")
        assert done["outcome"]["result"] == "rested"
        assert b.ys("get", "failed-1", "--json").returncode == 0


def test_an_execution_line_names_every_part_of_the_format():
    assert ExecutionLine.__required_keys__ == {"kind", "execution", *PARTS}


def test_migrate_to_another_sqlite_file_then_refused_unless_merge(exported, tmp_path: Path):
    h, text = exported
    target = tmp_path / "other.db"
    r = h.ys("migrate", "--to", str(target), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["counts"]["execution"]["imported"] == 3
    assert _executions(target) == ["done-1", "failed-1", "nap-1"]
    r = h.ys("migrate", "--to", str(target))
    assert r.returncode == 3 and "holds executions already" in r.stderr, r.stderr
    r = h.ys("migrate", "--to", str(target), "--merge")
    assert r.returncode == 0 and "3 there already" in r.stderr, r.stderr
    r = h.ys("migrate", "--to", str(h.db))
    assert r.returncode == 2 and "is this database" in r.stderr, r.stderr


def test_export_filters_narrow_the_executions_only(exported, tmp_path: Path):
    h, _ = exported
    r = h.ys("export", "--status", "failed", "--status", "completed", "--workflow", "boom")
    assert r.returncode == 0, r.stderr
    lines = _lines(r.stdout)
    ids = [x["execution"]["execution_id"] for x in lines if x["kind"] == "execution"]
    assert ids == ["failed-1"]
    assert any(x["kind"] == "value" for x in lines)
    r = h.ys("export", "--since", "1d")
    assert r.returncode == 0 and r.stdout.count('"kind":"execution"') == 3
    assert h.ys("export", "--since", "soon").returncode == 2


def test_a_different_history_already_there_is_a_conflict_named_on_stderr(exported, tmp_path):
    _, text = exported
    from ys.store import open_store

    with make_home(tmp_path / "b") as b:
        store = open_store(b.db)
        store.admit("hello", {"other": True}, execution_id="done-1")
        store.close()
        src = tmp_path / "a.jsonl"
        src.write_text(text)
        r = b.ys("import", str(src))
        assert r.returncode == 3, r.stderr
        assert "CONFLICT: execution 'done-1'" in r.stderr, r.stderr
        assert _executions(b.db) == ["done-1", "failed-1", "nap-1"]
        with sqlite3.connect(b.db) as conn:
            params = conn.execute("SELECT params FROM executions WHERE execution_id='done-1'")
            assert params.fetchone()[0] == '{"other":true}'  # left as it was


def test_migrate_with_conflicts_marks_the_source_all_the_same(exported, tmp_path):
    """What did not conflict is in the target now, live executions included: the source is
    marked all the same, so two databases never both run them (docs/design.md, "Keeping and
    moving the data"); the conflicting record stays readable in the source."""
    h, _ = exported
    from ys.store import open_store

    with make_home(tmp_path / "b") as b:
        store = open_store(b.db)
        store.admit("hello", {"other": True}, execution_id="done-1")
        store.close()
        r = h.ys("migrate", "--to", str(b.db), "--merge")
        assert r.returncode == 3, r.stderr
        assert "CONFLICT: execution 'done-1'" in r.stderr, r.stderr
        source = open_store(h.db)
        try:
            assert source.moved_to() == str(b.db)
            assert source.get("done-1") is not None
        finally:
            source.close()


def _edited(text: str) -> str:
    lines = text.splitlines(keepends=True)
    i = next(
        i
        for i, x in enumerate(lines)
        if '"execution_id":"done-1"' in x and '"kind":"execution"' in x
    )
    lines[i] = lines[i].replace('"status":"completed"', '"status":"failed"', 1)
    return "".join(lines)


def _cut(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[:-2]) + lines[-2][: len(lines[-2]) // 2]


def _header(version: int, text: str) -> str:
    rest = text.split("\n", 1)[1]
    return encode({"kind": "header", "format": "ys-export", "version": version}) + rest


@pytest.mark.parametrize(
    "damage, said",
    [
        (_cut, "cut short"),
        (_edited, "changed after it was exported"),
        (lambda t: "".join(t.splitlines(keepends=True)[:-1]), "before its end line"),
        (lambda t: _header(2, t), "newer ys (export format 2"),
        (lambda t: _header(0, t), "unknown format version 0"),
        (lambda t: "", "is empty"),
        (lambda t: '{"kind": "header"}\n', "cut short or is not a line of a ys export"),
    ],
)
def test_bad_input_is_refused_with_nothing_written(exported, tmp_path, damage, said):
    _, text = exported
    with make_home(tmp_path / "b") as b:
        src = tmp_path / "bad.jsonl"
        src.write_text(damage(text))
        r = b.ys("import", str(src))
        assert r.returncode == 2, r.stderr
        assert said in one_error_line(r, "INVALID_ARGUMENT")
        assert _executions(b.db) == []
        r = b.ys("import", "-", input=damage(text))
        assert r.returncode == 2 and said in r.stderr, r.stderr
        assert _executions(b.db) == []


def test_a_database_of_a_newer_ys_is_not_imported_into(exported, tmp_path):
    _, text = exported
    with make_home(tmp_path / "b") as b:
        from ys.store import open_store

        open_store(b.db).close()
        with sqlite3.connect(b.db) as conn:
            conn.execute("INSERT INTO schema_migrations VALUES (999, 0)")
        src = tmp_path / "a.jsonl"
        src.write_text(text)
        r = b.ys("import", str(src))
        assert r.returncode == 2 and "newer ys" in r.stderr, r.stderr
        assert _executions(b.db) == []


def test_export_of_a_home_without_a_database_says_so(tmp_path):
    with make_home(tmp_path / "b") as b:
        r = b.ys("export")
        assert r.returncode == 4 and "no database" in r.stderr, r.stderr
        assert not b.db.exists()


def test_export_with_no_daemon_upgrades_a_database_of_an_older_ys_first(tmp_path, monkeypatch):
    from ys.store.sqlite import schema

    with make_home(tmp_path / "b") as b:
        older = len(schema.MIGRATIONS) - 1  # the schema before the newest migration
        monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:older])
        conn = sqlite3.connect(b.db, isolation_level=None)
        schema.migrate(conn)
        monkeypatch.undo()
        conn.execute(
            "INSERT INTO executions (execution_id, workflow, params, context, status, "
            "admitted_at, updated_at, due_at, attempts, history_length, history_bytes) "
            "VALUES ('old-1', 'hello', '{}', '{}', 'admitted', 5.0, 5.0, 5.0, 0, 1, 66)"
        )
        conn.execute(
            "INSERT INTO events VALUES ('old-1', 1, 5.0, 'admitted', "
            '\'{"context":{},"execution_id":"old-1","params":{},"workflow":"hello"}\')'
        )
        conn.close()
        r = b.ys("export")
        assert r.returncode == 0, r.stderr
        (line,) = [x for x in _lines(r.stdout) if x["kind"] == "execution"]
        assert line["execution"]["execution_id"] == "old-1"
        assert line["execution"]["retried_by"] is None  # the newest migration's column


def test_migrate_marks_the_source_moved_so_no_daemon_starts_on_it_again(exported, tmp_path):
    """The source keeps its records but says where they went: a daemon started on it (which
    would run them a second time) is refused with one line naming the target, exit 3 (`ys
    daemon start`: 5, the daemon's line inside), and `ys doctor` says so. Migrating back
    into it clears the mark."""
    h, _ = exported
    b = make_home(tmp_path / "b")
    with b:
        r = h.ys("migrate", "--to", str(b.db))
        assert r.returncode == 0, r.stderr
        assert _executions(h.db) == ["done-1", "failed-1", "nap-1"]  # left as they were
        try:
            run = h.ys("daemon", "run", timeout=30)
            assert run.returncode == 3, run.stderr
            last = run.stderr.strip().splitlines()[-1]
            assert last.startswith("FAILED_PRECONDITION: ") and "; " in last, last
            assert f"moved to {b.db} by `ys migrate`" in last, last
            start = h.ys("daemon", "start", timeout=60)
            assert start.returncode == 5, start.stderr
            line = one_error_line(start, "DAEMON_UNAVAILABLE")
            assert "FAILED_PRECONDITION" in line and f"moved to {b.db}" in line, line
        finally:
            h.ys("daemon", "stop")
        doctor = h.ys("doctor", "--json")
        checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
        assert doctor.returncode == 1
        assert not checks["database"]["ok"], checks["database"]
        assert f"moved to {b.db}" in checks["database"]["detail"], checks["database"]

        # moved back before any daemon ran there: the source is a home again, the target not
        r = b.ys("migrate", "--to", str(h.db), "--merge")
        assert r.returncode == 0, r.stderr
        h.start()
        assert wait_status(h, "nap-1", "completed")["outcome"]["result"] == "rested"
        assert b.ys("daemon", "run", timeout=30).returncode == 3
