"""The PostgreSQL adapter: the store's clients over one database that many daemons share.

psycopg is an optional extra (`pip install 'ys[postgres]'`): nothing here imports it until a
PostgreSQL store is opened, so ys imports without it. `connect` is the one place a
connection is made (its settings, and a missing driver or an unreachable server turned into
one error that says what to do).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ys.errors import YsError

if TYPE_CHECKING:
    from ys.store.postgres.store import PostgresStore
    from ys.store.reading import PostgresReport

CONNECT_TIMEOUT = 5  # seconds, unless the URL says otherwise
MIN_SERVER = 120000  # PostgreSQL 12: FOR UPDATE SKIP LOCKED, generated columns, pg_notify


def driver() -> Any:
    """psycopg, or an error saying how to install it."""
    try:
        import psycopg
    except ImportError:
        raise YsError(
            "FAILED_PRECONDITION",
            "the database is PostgreSQL, but psycopg is not installed; run "
            "pip install 'ys[postgres]'",
        ) from None
    return psycopg


def connect(url: str, *, autocommit: bool = True, **kwargs: Any) -> Any:
    """A connection to `url` in autocommit mode (transactions are explicit), or a YsError
    whose message carries no password."""
    from ys.settings import redact

    psycopg = driver()
    if "connect_timeout" not in url:  # a server that does not answer: not a long hang
        kwargs.setdefault("connect_timeout", CONNECT_TIMEOUT)
    try:
        conn = psycopg.connect(url, autocommit=autocommit, **kwargs)
    except psycopg.Error as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise YsError(
            "FAILED_PRECONDITION",
            f"cannot connect to PostgreSQL at {redact(url)} ({detail}); check the URL and "
            "that the server runs",
            unreachable=True,
        ) from None
    if conn.info.server_version < MIN_SERVER:
        conn.close()
        raise YsError(
            "FAILED_PRECONDITION",
            f"PostgreSQL at {redact(url)} is version {conn.info.server_version}; "
            "ys needs 12 or newer",
        )
    return conn


def inspect(url: str) -> PostgresReport:
    """What `ys doctor` reports, read without writing: server and schema versions, row
    counts, and (on a migrated database) the records that differ from their history and where
    `ys migrate` moved the data (`moved_to`, None if it did not)."""
    from ys.store.postgres import schema
    from ys.store.reading import PostgresReport

    with connect(url) as conn:
        server = str(conn.info.parameter_status("server_version"))
        version = schema.version(conn)
        latest = len(schema.MIGRATIONS)
        if version != latest:
            return PostgresReport(server, version, latest, {}, None)
        # one snapshot for every count and every re-fold, while daemons go on writing
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            rows = {
                table: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
                for table in ("executions", "events", "steps", "effects", "kv", "schedules")
            }
            from ys.store.postgres.dialect import POSTGRES
            from ys.store.sql.dialect import FormatConnection
            from ys.store.sql.housekeeping import moved_to
            from ys.store.sql.reads import verify

            c = FormatConnection(conn, POSTGRES)
            return PostgresReport(server, version, latest, rows, verify(c), moved_to(c))


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":
        from ys.store.postgres.store import PostgresStore

        return PostgresStore
    raise AttributeError(name)


__all__ = ["PostgresStore", "connect", "driver", "inspect"]
