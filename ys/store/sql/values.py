"""Durable values that workflows wait for (the store's value waiters): `ValueClient`.

Each key has a version that grows by one per commit (a delete is a commit too, so versions
never go back). A put requests a wake for every execution waiting on its key in the same
transaction: after a crash either the new version and every wake are there, or neither.
A wait checks and registers in one transaction, so a put can never slip between the two:
a put, a delete and a wait on one key take the key's lock first (the dialect's:
ys/store/postgres/dialect.py says why PostgreSQL needs one).

(The `ys store` command and its routes keep their name for users; inside the code the
feature is "values", and "store" is the database adapter.)
"""

from __future__ import annotations

from typing import Any

from ys import codec
from ys.contract import MAX_PARAMS_BYTES, check_execution_id, check_time
from ys.errors import InvalidArgument, NotFoundError, VersionConflict
from ys.store.base import StoredValue, ValueEntry, ValueFound, ValueWritten
from ys.store.sql.core import Core
from ys.store.sql.executions import request_wake_tx


def lock_key(c: Any, key: str) -> None:
    c.dialect.lock_value_key(c, key)


def check_key(key: Any) -> str:
    return check_execution_id(key, what="store key")


def encode_value(value: Any) -> str:
    enc = codec.encode(value, path="value")
    if enc.status != "encoded" or enc.canonical is None:
        raise InvalidArgument("INVALID_ARGUMENT", enc.message or "not a durable value")
    if len(enc.canonical.encode()) > MAX_PARAMS_BYTES:
        raise InvalidArgument("INVALID_ARGUMENT", "the value is over 2 MiB encoded")
    return enc.canonical


def put_tx(c: Any, key: str, value_json: str, expected: int | None, now: float) -> ValueWritten:
    lock_key(c, key)
    row = c.execute("SELECT version, deleted FROM kv WHERE key=?", (key,)).fetchone()
    current = 0 if row is None or row[1] else int(row[0])
    if expected is not None and expected != current:
        raise VersionConflict(
            "VERSION_CONFLICT",
            f"{key} is at version {current}, not {expected}; read it again and retry",
            version=current,
        )
    version = (int(row[0]) if row else 0) + 1
    c.execute(
        "INSERT INTO kv (key, value, version, deleted, updated_at) VALUES (?,?,?,false,?) "
        "ON CONFLICT (key) DO UPDATE SET value=excluded.value, version=excluded.version, "
        "deleted=false, updated_at=excluded.updated_at",
        (key, value_json, version, now),
    )
    waiters = c.execute(
        "DELETE FROM kv_waiters WHERE key=? RETURNING execution_id", (key,)
    ).fetchall()
    woken = sorted({r[0] for r in waiters})  # one lock order for every put: by ID
    for execution_id in woken:
        try:
            request_wake_tx(c, execution_id, now, now, reason=f"store key {key} changed")
        except NotFoundError:
            pass  # the waiter's record was pruned
    return ValueWritten(key, version, now, len(woken))


def get(c: Any, key: str) -> StoredValue | None:
    row = c.execute(
        "SELECT value, version, updated_at FROM kv WHERE key=? AND NOT deleted", (key,)
    ).fetchone()
    if row is None:
        return None
    return StoredValue(key, codec.decode(row[0]), int(row[1]), row[2])


def list_keys(c: Any, prefix: str = "", limit: int = 1000) -> list[ValueEntry]:
    match, pattern = c.dialect.starts_with("key", prefix)  # case-sensitive on every engine
    rows = c.execute(
        f"SELECT key, version, updated_at FROM kv WHERE NOT deleted AND {match} "
        "ORDER BY key LIMIT ?",
        (pattern, limit),
    ).fetchall()
    return [ValueEntry(r[0], int(r[1]), r[2]) for r in rows]


def delete_tx(c: Any, key: str, now: float) -> bool:
    lock_key(c, key)
    cur = c.execute(
        "UPDATE kv SET value=NULL, deleted=true, version=version+1, updated_at=? "
        "WHERE key=? AND NOT deleted",
        (now, key),
    )
    return bool(cur.rowcount == 1)


def wait_tx(
    c: Any,
    key: str,
    execution_id: str,
    step_key: str,
    seen: int,
    timeout_at: float | None,
    now: float,
) -> ValueFound | None:
    """The value if the key exists at a version above `seen`; otherwise register the waiter
    (and its timeout wake) and return None, or, once timeout_at has passed, only return None.
    One transaction, under the key's lock: no put is ever missed."""
    lock_key(c, key)
    row = c.execute(
        "SELECT value, version, updated_at FROM kv WHERE key=? AND NOT deleted", (key,)
    ).fetchone()
    forget = "DELETE FROM kv_waiters WHERE key=? AND execution_id=? AND step_key=?"
    if row is not None and int(row[1]) > seen:
        c.execute(forget, (key, execution_id, step_key))
        return ValueFound(key, row[0], int(row[1]), row[2])
    if timeout_at is not None and timeout_at <= now:
        c.execute(forget, (key, execution_id, step_key))  # timed out: only check
        return None
    if (
        c.execute("SELECT 1 FROM executions WHERE execution_id=?", (execution_id,)).fetchone()
        is None
    ):
        raise NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
    c.execute(
        "INSERT INTO kv_waiters (key, execution_id, step_key, seen_version, registered_at) "
        "VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
        (key, execution_id, step_key, seen, now),
    )
    if timeout_at is not None:
        request_wake_tx(c, execution_id, timeout_at, now, reason=f"wait for {key} times out")
    return None


class Values:
    """The value client of one store: each call is one transaction (or one read)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def value_put(
        self, key: str, value: Any, expected_version: int | None = None, *, now: float | None = None
    ) -> ValueWritten:
        check_key(key)
        value_json = encode_value(value)
        t = self._core.now(now)
        return self._core.write(lambda c: put_tx(c, key, value_json, expected_version, t))

    def value_get(self, key: str) -> StoredValue | None:
        return self._core.read(lambda c: get(c, key))

    def value_list(self, prefix: str = "") -> list[ValueEntry]:
        return self._core.read(lambda c: list_keys(c, prefix))

    def value_delete(self, key: str, *, now: float | None = None) -> bool:
        t = self._core.now(now)
        return self._core.write(lambda c: delete_tx(c, key, t))

    def value_wait(
        self,
        key: str,
        execution_id: str,
        step_key: str,
        seen: int = 0,
        timeout_at: float | None = None,
        *,
        now: float | None = None,
    ) -> ValueFound | None:
        check_key(key)
        if isinstance(seen, bool) or not isinstance(seen, int) or not 0 <= seen < 2**63:
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"seen must be a version number >= 0, not {seen!r}"
            )
        if timeout_at is not None:
            timeout_at = check_time(timeout_at, "timeout_at")
        t = self._core.now(now)
        return self._core.write(
            lambda c: wait_tx(c, key, execution_id, step_key, seen, timeout_at, t)
        )
