"""The SQLite schema's migrations: one that fails part-way leaves the database as it was, and a
database written by a newer ys is refused (exit 2) with nothing written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ys.errors import InvalidArgument
from ys.store.sqlite import SqliteStore, schema


def _state(path: Path) -> tuple[list[tuple[object, ...]], list[str]]:
    with sqlite3.connect(path) as conn:
        versions = conn.execute("SELECT version, applied_at FROM schema_migrations").fetchall()
        names = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master"))
    return versions, names


def test_a_failing_migration_leaves_the_database_as_it_was(tmp_path: Path, monkeypatch):
    path = tmp_path / "ys.db"
    SqliteStore(path).close()
    before = _state(path)
    broken = [
        *schema.MIGRATIONS,
        "CREATE TABLE half_made (x INTEGER); INSERT INTO no_such_table VALUES (1);",
    ]
    monkeypatch.setattr(schema, "MIGRATIONS", broken)
    with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        SqliteStore(path)
    assert _state(path) == before  # no half_made, no version recorded


def test_a_database_of_a_newer_ys_is_refused_unchanged(tmp_path: Path):
    path = tmp_path / "ys.db"
    SqliteStore(path).close()
    newer = len(schema.MIGRATIONS) + 1
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (?, 0)", (newer,))
    before = _state(path)
    with pytest.raises(InvalidArgument, match="newer ys") as caught:
        SqliteStore(path)
    assert caught.value.exit_code == 2
    assert f"schema {newer}" in caught.value.message
    assert _state(path) == before
