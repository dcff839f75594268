"""The PostgreSQL schema: versioned migrations, each in one transaction, applied once when
several daemons start on a new database together; the due-notification trigger fires at
commit only."""

from __future__ import annotations

import pytest

from tests.support import T0, Threads, wait_until
from ys.store.postgres import connect, schema


def tables(url: str) -> set[str]:
    with connect(url) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
    return {r[0] for r in rows}


def test_a_new_database_is_migrated_to_the_newest_version_once(pg_url):
    with connect(pg_url) as conn:
        assert schema.version(conn) == 0
        assert schema.migrate(conn) == len(schema.MIGRATIONS)
        assert schema.migrate(conn) == len(schema.MIGRATIONS)  # nothing left to do
        versions = [
            r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")
        ]
    assert versions == list(range(1, len(schema.MIGRATIONS) + 1))
    assert set(schema.TABLES) | {"schema_migrations"} <= tables(pg_url)


def test_daemons_starting_together_migrate_once(pg_url):
    def migrate(_: int) -> int:
        with connect(pg_url) as conn:
            return schema.migrate(conn)

    results = Threads(8, migrate).results()
    assert results == [len(schema.MIGRATIONS)] * 8, results
    with connect(pg_url) as conn:
        count = conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0]
    assert count == len(schema.MIGRATIONS)


def test_a_failing_migration_leaves_nothing_of_itself(pg_url, monkeypatch):
    import psycopg

    broken = [*schema.MIGRATIONS, "CREATE TABLE half_made (x int); CREATE TABLE broken ("]
    monkeypatch.setattr(schema, "MIGRATIONS", broken)
    with connect(pg_url) as conn:
        with pytest.raises(psycopg.errors.SyntaxError):
            schema.migrate(conn)
        assert schema.version(conn) == len(broken) - 1  # every good one stands
    assert "half_made" not in tables(pg_url)


def test_a_due_row_notifies_listeners_at_commit_and_a_rollback_never(pg_url):
    with connect(pg_url) as conn:
        schema.migrate(conn)
    insert = (
        "INSERT INTO executions (execution_id, workflow, params, context, status, "
        "admitted_at, updated_at, due_at, attempts, history_length, history_bytes) "
        "VALUES (%s, 'w', '{}', '{}', 'admitted', 1, 1, 1, 0, 1, 10)"
    )
    with connect(pg_url) as listener, connect(pg_url) as writer:
        listener.execute("LISTEN ys_due")
        with pytest.raises(RuntimeError), writer.transaction():
            writer.execute(insert, ("rolled-back",))
            raise RuntimeError("roll back")
        with writer.transaction():
            for i in range(5):  # one transaction: its notifications fold into one
                writer.execute(insert, (f"e{i}",))
        # notifications arrive in commit order: had the rollback sent one, it would come first
        # and a second would follow; a bounded wait for a second proves there is none
        got = list(listener.notifies(timeout=1, stop_after=2))
        assert [n.channel for n in got] == ["ys_due"]


def test_a_database_of_a_newer_ys_is_refused_unchanged(pg_url):
    from ys.errors import InvalidArgument

    with connect(pg_url) as conn:
        schema.migrate(conn)
        newer = len(schema.MIGRATIONS) + 1
        conn.execute("INSERT INTO schema_migrations VALUES (%s, 0)", (newer,))
        with pytest.raises(InvalidArgument, match="newer ys") as caught:
            schema.migrate(conn)
        assert caught.value.exit_code == 2
        assert schema.version(conn) == newer


def test_a_resumed_workflow_notifies_listeners(pg_url):
    with connect(pg_url) as conn:
        schema.migrate(conn)
    with connect(pg_url) as listener, connect(pg_url) as writer:
        listener.execute("LISTEN ys_due")
        with writer.transaction():  # a pause makes nothing due: no notification
            writer.execute("INSERT INTO workflow_pauses VALUES ('w', 1)")
        assert list(listener.notifies(timeout=0.5, stop_after=1)) == []
        with writer.transaction():
            writer.execute("DELETE FROM workflow_pauses WHERE workflow = 'w'")
        got = list(listener.notifies(timeout=5, stop_after=1))
        assert [n.channel for n in got] == ["ys_due"]


def test_a_step_save_is_a_heap_only_update_of_its_row(daemons):
    """A step's save changes the row's `updated_at`, history and outcome, none of which an
    index of `executions` covers (recent failures are indexed by the computed `failed_at`):
    PostgreSQL then updates the row in place of its page (HOT), writing no index entry.
    Counted in the server's statistics, flushed by the writer's backend at its commits."""
    from ys.values import StepWrite

    (store,) = daemons(1, clock=lambda: T0)
    store.admit("w", None, execution_id="e1", now=T0)
    (d,) = store.claim_due(now=T0, limit=1, lease_seconds=60)
    writer = store.core.writer.conn

    def updates() -> tuple[int, int]:
        with connect(store.url) as conn:
            row = conn.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                "WHERE relname = 'executions'"
            ).fetchone()
        return int(row[0]), int(row[1])

    writer.execute("SELECT pg_stat_force_next_flush()")
    store.save_step("e1", d.token, "s0", StepWrite("run", "completed", "0"), now=T0)
    before = wait_until(lambda: updates() if updates()[0] > 0 else None, message="stats")
    writer.execute("SELECT pg_stat_force_next_flush()")
    for i in range(1, 6):
        store.save_step("e1", d.token, f"s{i}", StepWrite("run", "completed", "1"), now=T0 + i)
    after = wait_until(
        lambda: updates() if updates()[0] >= before[0] + 5 else None, message="stats"
    )
    saves, heap_only = after[0] - before[0], after[1] - before[1]
    assert saves >= 5 and heap_only == saves, (before, after)
