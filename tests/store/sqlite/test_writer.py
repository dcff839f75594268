"""The SQLite adapter's own group writer (ys/store/sqlite/db.py), below the contract: a batch
in a fixed order answers each write as if it ran alone, a long run of prepared inserts is
split within SQLite's variable limit, and a bug in the writer's own code answers every
waiting request instead of leaving it waiting. (The contract suite tests what a store's
callers see of group commit: tests/store/test_group_writer.py.)"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import Threads
from ys.store.sqlite import SqliteStore

T0 = 1_000_000.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "ys.db", group_commit=True)
    yield s
    s.close()


def test_an_unforeseen_writer_error_answers_every_waiting_request(store, monkeypatch):
    writer = store.core.writer

    def broken(reqs: list[Any]) -> None:
        raise sqlite3.InterfaceError("writer bug")

    monkeypatch.setattr(writer, "_run_batch", broken)
    results = Threads(4, lambda i: store.admit("echo", {"n": i}, now=T0)).results()
    assert all(isinstance(r, sqlite3.InterfaceError) for r in results), results
    monkeypatch.undo()
    assert store.admit("echo", {}, execution_id="later", now=T0).started
    assert [r.execution_id for r in store.list().items] == ["later"]


# -- the writer, with batches in a fixed order -----------------------------------------------


class Conflict(Exception):
    pass


@pytest.fixture
def table(tmp_path):
    from ys.store.sqlite.db import Writer, connect

    conn = connect(str(tmp_path / "w.db"))
    conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, v)")
    conn.execute("INSERT INTO t VALUES ('taken', 'first')")
    writer = Writer(conn)  # direct mode: no thread; the tests call _settle themselves
    yield writer, conn
    conn.close()


INSERT_T = "INSERT INTO t (id, v) VALUES (?,?)"


def prepared(key: str, v: Any = "p") -> Any:
    """A prepared insert of (key, v) whose own transaction body says what happened instead."""
    from ys.store.sqlite.db import _Request

    def fn(c: sqlite3.Connection) -> str:
        if c.execute("SELECT 1 FROM t WHERE id=?", (key,)).fetchone():
            raise Conflict(key)
        c.execute(INSERT_T, (key, "by fn"))
        return f"fn {key}"

    return _Request(fn, [(INSERT_T, (key, v))], f"prepared {key}")


def plain(fn: Any) -> Any:
    from ys.store.sqlite.db import _Request

    return _Request(fn, None, None)


def outcome(req: Any) -> Any:
    try:
        return req.wait()
    except BaseException as exc:
        return type(exc).__name__


def rows(conn: sqlite3.Connection) -> dict[str, Any]:
    return dict(conn.execute("SELECT id, v FROM t").fetchall())


def test_a_mixed_batch_answers_each_write_as_if_it_ran_alone(table):
    writer, conn = table

    def boom(c: sqlite3.Connection) -> None:
        c.execute(INSERT_T, ("boom", "never"))  # rolled back with the failed write
        raise ValueError("fails alone")

    def fine(c: sqlite3.Connection) -> str:
        c.execute(INSERT_T, ("fine", "plain"))
        return "fine"

    def also_fine(c: sqlite3.Connection) -> str:
        c.execute(INSERT_T, ("also", "plain"))
        return "also"

    reqs = [
        prepared("a"),
        plain(boom),
        prepared("b"),
        prepared("taken"),
        plain(fine),
        prepared("d"),
        prepared("e"),
        plain(also_fine),
        prepared("huge", 2**70),  # no SQLite integer holds it: OverflowError, not sqlite3.Error
        prepared("c"),
    ]
    writer._settle(reqs)
    # Once `boom` is out, a, b and taken are one run of prepared inserts: "taken" makes that
    # run fail, so all three are decided by their own bodies; d and e stay prepared.
    assert [outcome(r) for r in reqs] == [
        "fn a",
        "ValueError",
        "fn b",
        "Conflict",
        "fine",
        "prepared d",
        "prepared e",
        "also",
        "fn huge",
        "fn c",
    ]
    assert rows(conn) == {
        "taken": "first",
        "a": "by fn",
        "b": "by fn",
        "fine": "plain",
        "d": "p",
        "e": "p",
        "also": "plain",
        "huge": "by fn",
        "c": "by fn",
    }


def test_a_run_longer_than_one_insert_carries_is_split_within_the_variable_limit(table):
    writer, conn = table
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)  # as SQLite builds before 3.32
    conn.execute("CREATE TABLE wide (" + ", ".join(f"c{i}" for i in range(40)) + ")")
    sql = "INSERT INTO wide VALUES (" + ",".join("?" * 40) + ")"
    from ys.store.sqlite.db import _Request

    def never(c: sqlite3.Connection) -> None:
        raise AssertionError("a prepared insert fell back to its transaction body")

    reqs = [_Request(never, [(sql, tuple(range(n, n + 40)))], n) for n in range(201)]
    writer._settle(reqs)
    assert [r.wait() for r in reqs] == list(range(201))
    assert conn.execute("SELECT count(*), sum(c0) FROM wide").fetchone() == (201, sum(range(201)))


def test_a_file_that_cannot_be_written_answers_database_unavailable_until_it_can(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """The file's disk goes read-only mid-run (here: the writer's connection made read-only,
    which fails writes with SQLite's own SQLITE_READONLY, as a read-only remount does):
    every write answers DATABASE_UNAVAILABLE (retry), the log says so once, the store says
    the database is down, and once the file is writable again writes go on with everything
    acknowledged before still there."""
    from ys.errors import DatabaseUnavailable

    store = SqliteStore(tmp_path / "ys.db", group_commit=True)
    try:
        store.admit("wf", execution_id="before")
        store.core.writer.conn.execute("PRAGMA query_only=ON")
        for i in range(3):
            with pytest.raises(DatabaseUnavailable) as err:
                store.admit("wf", execution_id=f"during-{i}")
            assert err.value.code == "DATABASE_UNAVAILABLE" and err.value.exit_code == 5
        assert not store.database_up()
        assert store.get("before") is not None  # reads still answer
        said = [r for r in caplog.records if "cannot be written" in r.getMessage()]
        assert len(said) == 1, said
        store.core.writer.conn.execute("PRAGMA query_only=OFF")
        assert store.admit("wf", execution_id="after").started
        assert store.database_up()
        assert {r.execution_id for r in store.list(limit=10).items} == {"before", "after"}
        assert store.verify() == []
    finally:
        store.close()
