"""A throw-away PostgreSQL server for the tests, and a fresh database for each test.

`pg_server` (session-scoped) runs `initdb` into a temporary folder and `pg_ctl start` with a
Unix socket in that folder and no TCP, as the `postgres` user when the tests run as root
(initdb refuses root), and stops it at the end. `YS_TEST_POSTGRES_URL` names an existing
server to use instead (its user must be allowed to CREATE DATABASE). `pg_url` is a new,
empty database on it for one test, dropped afterwards.

In CI (CI=true) these tests always run: a missing server or psycopg fails loudly. Elsewhere
they skip with the reason.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

SERVER_USER = "postgres"  # whom the server runs as when the tests run as root
SUPERUSER = "ys"  # the server's superuser, the role the tests connect as
_names = itertools.count()


def unavailable(reason: str) -> None:
    """No PostgreSQL to test against: a failure in CI, a skip elsewhere."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must run the PostgreSQL tests, but {reason}", pytrace=False)
    pytest.skip(reason)


def bin_dir() -> Path | None:
    """The newest server's binaries: on PATH, or in Debian's /usr/lib/postgresql/N/bin."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    return Path(found[-1]).parent if found else None


def with_database(url: str, name: str) -> str:
    """`url` naming database `name` instead of its own."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + quote(name), parts.query, parts.fragment))


class PgServer:
    """One server in a temporary folder: data in `<dir>/data`, its socket in `<dir>`."""

    def __init__(self, binaries: Path, base: Path | None = None, durable: bool = False) -> None:
        """`base`: where the temporary folder goes (default /tmp); `durable`: fsync on, as a
        real server (the benchmarks), instead of off (the tests)."""
        self.bin = binaries
        self.durable = durable
        self.dir = Path(tempfile.mkdtemp(prefix="ys-pg-", dir=base))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(SERVER_USER)
            except KeyError:
                unavailable(
                    f"the tests run as root and there is no {SERVER_USER!r} user to "
                    "run PostgreSQL as"
                )
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
            self.as_user = ["runuser", "-u", SERVER_USER, "--"]

    @property
    def url(self) -> str:
        """The maintenance database, through the socket in our folder."""
        return f"postgresql://{SUPERUSER}@/postgres?host={quote(str(self.dir), safe='')}"

    def _run(self, *argv: str) -> None:
        proc = subprocess.run(
            [*self.as_user, *argv],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} failed ({proc.returncode}):\n"
                f"{proc.stdout}{proc.stderr}{self._log_tail()}"
            )

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def start(self) -> PgServer:
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-instructions",
            *([] if self.durable else ["--no-sync"]),
        )
        # A private Unix socket and no TCP. fsync=off makes this throw-away server quick on
        # a shared test box; it changes nothing the adapter does (ys never turns off
        # synchronous_commit: a reply still waits for the commit).
        self.options = " ".join(
            [
                "-c listen_addresses=''",
                f"-c unix_socket_directories='{self.dir}'",
                *([] if self.durable else ["-c fsync=off", "-c full_page_writes=off"]),
                "-c max_connections=300",
                "-c shared_buffers=32MB",
            ]
        )
        self._start()
        return self

    def _start(self) -> None:
        """`pg_ctl start` with this server's options; returns once it accepts connections."""
        self._ctl("-l", str(self.log), "-o", self.options, "-w", "-t", "60", "start")

    def _ctl(self, *args: str) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), *args)

    def restart(self, mode: str = "fast") -> None:
        """`pg_ctl restart -m MODE` (fast: sessions are told and the server shuts down
        cleanly; immediate: it quits at once and recovers from its WAL), with the options it
        was started with; returns once it accepts connections again."""
        self._ctl("-l", str(self.log), "-m", mode, "-w", "-t", "60", "restart")

    def stop_now(self) -> None:
        """Shut the server down at once (`-m immediate`), its data kept for `resume`."""
        self._ctl("-m", "immediate", "-w", "stop")

    def resume(self) -> None:
        """Start again, with the same options, a server `stop_now` shut down."""
        self._start()

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():  # not already stopped (`stop_now`)
                self._run(
                    str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"
                )
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def _psycopg() -> object:
    try:
        import psycopg
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[test]' installs it)")
    return psycopg


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of a server's maintenance database, for the whole session."""
    _psycopg()
    existing = os.environ.get("YS_TEST_POSTGRES_URL")
    if existing:
        yield existing
        return
    binaries = bin_dir()
    if binaries is None:
        unavailable(
            "no PostgreSQL server binaries (initdb) on PATH or in "
            "/usr/lib/postgresql/*/bin; apt-get install postgresql"
        )
    assert binaries is not None
    server = PgServer(binaries).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def pg_own_server() -> Iterator[PgServer]:
    """A server of this test's own, which it may restart or stop (`restart`, `stop_now`,
    `resume`): never the session's, whose other tests would see it go away."""
    _psycopg()
    binaries = bin_dir()
    if binaries is None:
        unavailable(
            "no PostgreSQL server binaries (initdb) on PATH or in "
            "/usr/lib/postgresql/*/bin; apt-get install postgresql"
        )
    assert binaries is not None
    server = PgServer(binaries).start()
    try:
        yield server
    finally:
        server.stop()


class Databases:
    """Makes fresh, empty databases on one server and drops them at the end."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.made: list[str] = []

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(sql)

    def create(self) -> str:
        name = f"ys_test_{os.getpid()}_{next(_names)}"
        # template0: empty and never connected to, so copying it never waits for a session
        self._admin(f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8'")
        self.made.append(name)
        return with_database(self.server_url, name)

    def drop_all(self) -> None:
        for name in reversed(self.made):
            self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.made.clear()


@pytest.fixture
def pg_databases(pg_server: str) -> Iterator[Databases]:
    dbs = Databases(pg_server)
    yield dbs
    dbs.drop_all()


@pytest.fixture
def pg_url(pg_databases: Databases) -> str:
    """A new, empty database for this test (dropped after it)."""
    return pg_databases.create()


# -- the store contract suite's PostgreSQL entry (tests/store/conftest.py) ---------------------


def _shown(sql: str, params: object) -> str:
    """A statement as a trace shows it: with its parameters, as SQLite's trace callback shows
    a statement with its values bound."""
    return sql if params is None else f"{sql} -- {params!r}"


class _Traced:
    """A psycopg connection whose statements are shown to a callback first."""

    def __init__(self, conn: object, callback: Callable[[str], None]) -> None:
        self._conn = conn
        self._callback = callback

    def execute(self, sql: str, *args: object, **kwargs: object) -> object:
        self._callback(_shown(sql, args[0] if args else kwargs.get("params")))
        return self._conn.execute(sql, *args, **kwargs)  # type: ignore[attr-defined]

    def cursor(self) -> object:
        return _TracedCursor(self._conn.cursor(), self._callback)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


class _TracedCursor:
    def __init__(self, cur: object, callback: Callable[[str], None]) -> None:
        self._cur = cur
        self._callback = callback

    def executemany(self, sql: str, rows: object) -> object:
        rows = list(rows)  # type: ignore[call-overload]
        for row in rows:
            self._callback(_shown(sql, row))
        return self._cur.executemany(sql, rows)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._cur, name)


class PostgresAdapter:
    """tests/store's Adapter for ys.store.postgres: each database a fresh one on the test
    server (`bind` gives it the test's `pg_databases`)."""

    name = "postgres"
    group_commit = True
    many_ids = 60  # `find` has one way through matches on PostgreSQL: enough to page it

    def __init__(self) -> None:
        self.databases: Databases | None = None

    def bind(self, request: pytest.FixtureRequest) -> None:
        """Make this adapter's databases on the test server: the test's own (`pg_databases`),
        or, for a fixture wider than one test, a set dropped when that fixture ends."""
        if request.scope == "function":
            self.databases = request.getfixturevalue("pg_databases")
            return
        dbs = Databases(request.getfixturevalue("pg_server"))
        request.addfinalizer(dbs.drop_all)
        self.databases = dbs

    def create(self, directory: Path) -> str:
        assert self.databases is not None, "bind() first"
        return self.databases.create()

    def open(self, location: str, **options: object) -> object:
        from ys.store.postgres import PostgresStore

        return PostgresStore(location, **options)  # type: ignore[arg-type]

    def clone(self, location: str, directory: Path) -> str:
        """A new database copied from `location` (no session may be connected to it)."""
        import psycopg

        assert self.databases is not None, "bind() first"
        source = urlsplit(location).path.lstrip("/")
        name = f"ys_test_{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.databases.server_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
        self.databases.made.append(name)
        return with_database(self.databases.server_url, name)

    def rows(self, location: str, table: str) -> list[dict[str, object]]:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(location, autocommit=True, row_factory=dict_row) as conn:
            names = [
                r["column_name"]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "AND table_schema = current_schema() ORDER BY ordinal_position",
                    (table,),
                )
            ]
            order = ", ".join(names)
            return list(conn.execute(f"SELECT * FROM {table} ORDER BY {order}"))

    def delete_rows(self, location: str, *tables: str) -> None:
        import psycopg

        with psycopg.connect(location) as conn:  # one transaction, committed on exit
            for table in tables:
                conn.execute(f"DELETE FROM {table}")

    @contextmanager
    def fail_on_insert(
        self,
        store: object,
        table: str,
        *,
        kind: str | None = None,
        skip: int = 0,
        after_row: bool = False,
    ) -> Iterator[None]:
        """A trigger: the count lives in a table, so it is rolled back with the failed
        transaction (every transaction that reaches the (skip+1)th row fails)."""
        import psycopg

        url = store.url  # type: ignore[attr-defined]
        when = f"WHEN (NEW.kind = '{kind}')" if kind is not None else ""
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE ys_test_inserts (n bigint NOT NULL)")
            conn.execute("INSERT INTO ys_test_inserts VALUES (0)")
            conn.execute(f"""
                CREATE FUNCTION ys_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
                DECLARE seen bigint;
                BEGIN
                    UPDATE ys_test_inserts SET n = n + 1 RETURNING n INTO seen;
                    IF seen > {int(skip)} THEN
                        RAISE EXCEPTION 'injected failure';
                    END IF;
                    RETURN NEW;
                END $$""")
            conn.execute(
                f"CREATE TRIGGER ys_test_fail {'AFTER' if after_row else 'BEFORE'} "
                f"INSERT ON {table} FOR EACH ROW {when} "
                "EXECUTE FUNCTION ys_test_fail()"
            )
            try:
                yield
            finally:
                conn.execute(f"DROP TRIGGER IF EXISTS ys_test_fail ON {table}")
                conn.execute("DROP FUNCTION IF EXISTS ys_test_fail()")
                conn.execute("DROP TABLE IF EXISTS ys_test_inserts")

    @contextmanager
    def on_statement(self, store: object, callback: Callable[[str], None]) -> Iterator[None]:
        """Every statement the store's writer runs passes `callback` first (a stand-in for
        the writer's connection that forwards everything else)."""
        writer = store.core.writer  # type: ignore[attr-defined]
        real = writer.conn
        writer.conn = _Traced(real, callback)
        try:
            yield
        finally:
            writer.conn = real

    def force_id_bits(self, monkeypatch: pytest.MonkeyPatch, bits: Iterable[int]) -> None:
        from ys.store.sql import events

        offered = iter(bits)
        monkeypatch.setattr(events, "id_bits", lambda: next(offered))

    def tamper(self, location: str, execution_id: str, **columns: object) -> None:
        self.update_rows(location, "executions", {"execution_id": execution_id}, **columns)

    def update_rows(
        self, location: str, table: str, where: dict[str, object], **columns: object
    ) -> None:
        import psycopg

        sets = ", ".join(f"{name} = %s" for name in columns)
        match = " AND ".join(f"{name} = %s" for name in where)
        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute(
                f"UPDATE {table} SET {sets} WHERE {match}",  # type: ignore[arg-type]
                (*columns.values(), *where.values()),
            )

    def limit_space(self, store: object, extra_bytes: int | None) -> None:
        """A database cannot be given a size limit; a trigger stands in for a full disk:
        once rows of more than `extra_bytes` were written, every write fails with SQLSTATE
        53100 (disk_full), as PostgreSQL's own writes then do."""
        import psycopg

        url = store.url  # type: ignore[attr-defined]
        with psycopg.connect(url, autocommit=True) as conn:
            tables = ("executions", "events", "steps", "kv", "effects", "start_requests")
            for table in tables:
                conn.execute(f"DROP TRIGGER IF EXISTS test_space ON {table}")
            conn.execute("DROP TABLE IF EXISTS test_space_budget")
            if extra_bytes is None:
                return
            conn.execute("CREATE TABLE test_space_budget (left_bytes bigint NOT NULL)")
            conn.execute("INSERT INTO test_space_budget VALUES (%s)", (extra_bytes,))
            conn.execute("""
                CREATE OR REPLACE FUNCTION test_space() RETURNS trigger LANGUAGE plpgsql AS $$
                DECLARE remaining bigint;
                BEGIN
                    UPDATE test_space_budget SET left_bytes = left_bytes - pg_column_size(NEW)
                        RETURNING left_bytes INTO remaining;
                    IF remaining < 0 THEN
                        RAISE EXCEPTION 'could not extend file: No space left on device'
                            USING ERRCODE = 'disk_full';
                    END IF;
                    RETURN NEW;
                END $$""")
            for table in tables:
                conn.execute(
                    f"CREATE TRIGGER test_space BEFORE INSERT OR UPDATE ON {table} "
                    "FOR EACH ROW EXECUTE FUNCTION test_space()"
                )

    @contextmanager
    def hold_writes(self, store: object, waiting: int) -> Iterator[list[int]]:
        import threading

        from tests.support import wait_until

        writer = store.core.writer  # type: ignore[attr-defined]
        sizes: list[int] = []
        commit = writer._commit

        def counting_commit(reqs: list[object]) -> None:
            sizes.append(len(reqs))
            commit(reqs)

        writer._commit = counting_commit
        entered, release = threading.Event(), threading.Event()

        def block(conn: object) -> None:
            entered.set()
            release.wait(30)

        blocker = threading.Thread(target=writer.write, args=(block,))
        blocker.start()
        try:
            assert entered.wait(30), "the writer never ran the blocking request"
            yield sizes
            wait_until(
                lambda: writer._queue.qsize() >= waiting,
                timeout=30.0,
                interval=0.001,
                message=f"{waiting} writes queued",
            )
        finally:
            release.set()
            blocker.join(30)
