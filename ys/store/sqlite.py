"""The SQLite adapter: RFC 001's execution client, leases, and step records.

Every write runs through the Writer (one transaction, or a savepoint inside a group commit),
computes events, folds them with `apply`, and persists events and projection together.
"""

from __future__ import annotations

import builtins
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ys import codec
from ys.errors import ExecutionAdmissionError, InvalidArgument, LeaseLost, NotFound
from ys.store import reads
from ys.store.base import (
    DEFAULT_PAGE,
    MAX_PARAMS_BYTES,
    Admission,
    Delivery,
    Description,
    Page,
    StepRecord,
    check_execution_id,
    check_time,
    check_workflow_name,
)
from ys.store.db import Writer, connect
from ys.store.records import (
    ADMITTED,
    CANCELLED,
    CLAIMED,
    COMPLETED,
    FAILED,
    RELEASED,
    STEP,
    SUSPENDED,
    TERMINAL,
    WAKE_REQUESTED,
    Event,
    RawJSON,
    Record,
    apply,
)
from ys.store.schema import migrate

T = TypeVar("T")
DEFAULT_LEASE_SECONDS = 30.0

_RECORD_COLUMNS = (
    "execution_id, workflow, {params}, {context}, status, outcome, admitted_at, updated_at, "
    "due_at, covered_due_at, prior_status, attempts, parent_id, parent_step, parent_detached, "
    "cancel_requested, history_length"
)
_FULL = _RECORD_COLUMNS.format(params="params", context="context")
_LIGHT = _RECORD_COLUMNS.format(params="''", context="''")


def row_to_record(row: tuple[Any, ...]) -> Record:
    parent = None
    if row[12] is not None:
        parent = {"execution_id": row[12], "step_key": row[13], "detached": bool(row[14])}
    return Record(
        execution_id=row[0],
        workflow=row[1],
        params_json=row[2],
        context_json=row[3],
        status=row[4],
        outcome=json.loads(row[5]) if row[5] is not None else None,
        admitted_at=row[6],
        updated_at=row[7],
        due_at=row[8],
        covered_due_at=row[9],
        prior_status=row[10],
        attempts=row[11],
        parent=parent,
        cancel_requested=bool(row[15]),
        history_length=row[16],
    )


def load(c: sqlite3.Connection, execution_id: str, payload: bool = True) -> Record | None:
    row = c.execute(
        f"SELECT {_FULL if payload else _LIGHT} FROM executions WHERE execution_id = ?",
        (execution_id,),
    ).fetchone()
    return row_to_record(row) if row else None


def event_text(data: dict[str, Any]) -> str:
    """Canonical JSON of an event's data; RawJSON values (params) are embedded unchanged."""
    parts = []
    for key in sorted(data):
        value = data[key]
        text = str(value) if isinstance(value, RawJSON) else json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        parts.append(f"{json.dumps(key)}:{text}")
    return "{" + ",".join(parts) + "}"


def append(c: sqlite3.Connection, prior: Record | None, events: list[Event]) -> Record:
    """Fold `events` onto `prior` and persist the events and the new projection together."""
    record = prior
    seq = prior.history_length if prior else 0
    nbytes = 0
    rows = []
    for e in events:
        record = apply(record, e)
        seq += 1
        text = event_text(e.data)
        nbytes += len(text.encode("utf-8"))  # bytes, not characters
        rows.append((record.execution_id, seq, e.at, e.kind, text))
    assert record is not None
    outcome = (
        json.dumps(record.outcome, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        if record.outcome is not None
        else None
    )
    if prior is None:
        p = record.parent or {}
        c.execute(
            "INSERT INTO executions (execution_id, workflow, params, context, status, outcome, "
            "admitted_at, updated_at, due_at, covered_due_at, prior_status, attempts, parent_id, "
            "parent_step, parent_detached, cancel_requested, history_length, history_bytes) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                record.execution_id, record.workflow, record.params_json, record.context_json,
                record.status, outcome, record.admitted_at, record.updated_at, record.due_at,
                record.covered_due_at, record.prior_status, record.attempts,
                p.get("execution_id"), p.get("step_key"),
                int(bool(p.get("detached"))) if p else None,
                int(record.cancel_requested), record.history_length, nbytes,
            ),
        )  # first: a duplicate execution_id fails here, before any event is written
    else:
        c.execute(
            "UPDATE executions SET status=?, outcome=?, updated_at=?, due_at=?, covered_due_at=?, "
            "prior_status=?, attempts=?, cancel_requested=?, history_length=?, "
            "history_bytes=history_bytes+? WHERE execution_id=?",
            (
                record.status, outcome, record.updated_at, record.due_at, record.covered_due_at,
                record.prior_status, record.attempts, int(record.cancel_requested),
                record.history_length, nbytes, record.execution_id,
            ),
        )
    c.executemany("INSERT INTO events (execution_id, seq, at, kind, data) VALUES (?,?,?,?,?)", rows)
    return record


def check_lease(c: sqlite3.Connection, execution_id: str, token: str, now: float) -> None:
    """Fencing: only the live lease's token may write; an expired lease is already lost."""
    row = c.execute(
        "SELECT lease_token, lease_expires_at FROM executions WHERE execution_id = ?",
        (execution_id,),
    ).fetchone()
    if row is None:
        raise NotFound("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
    if row[0] is None or row[0] != token or row[1] <= now:
        raise LeaseLost(
            "LEASE_LOST",
            f"the delivery of {execution_id!r} no longer holds its lease; another delivery owns it",
        )


class SqliteStore:
    """One SQLite file. Thread-safe: writes go through one Writer, reads use per-thread
    connections (WAL lets them run beside the writer)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        group_commit: bool = False,
        clock: Callable[[], float] = time.time,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self.path = os.fspath(path)
        self.clock = clock
        self.lease_seconds = lease_seconds
        conn = connect(self.path)
        migrate(conn)
        self._writer = Writer(conn, group=group_commit)
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()

    # -- plumbing ---------------------------------------------------------------------------

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._writer.write(fn)

    def reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def close(self) -> None:
        self._writer.close()
        self._writer.conn.close()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()

    def _now(self, now: float | None) -> float:
        return self.clock() if now is None else now

    # -- admission --------------------------------------------------------------------------

    def admit(
        self,
        workflow: str,
        params: Any = None,
        *,
        context: dict[str, Any] | None = None,
        execution_id: str | None = None,
        if_exists: str = "fail",
        parent: dict[str, Any] | None = None,
        now: float | None = None,
    ) -> Admission:
        check_workflow_name(workflow)
        if execution_id is not None:
            check_execution_id(execution_id)
        if if_exists not in ("fail", "use-existing"):
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"if_exists must be 'fail' or 'use-existing', not {if_exists!r}"
            )
        params_json = encode_event_value({} if params is None else params, "params")
        if len(params_json.encode("utf-8")) > MAX_PARAMS_BYTES:
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                f"params are {len(params_json.encode())} bytes encoded; the limit is 2 MiB",
            )
        context_json = encode_event_value(context, "context") if context else "{}"
        at = self._now(now)

        def tx(c: sqlite3.Connection) -> Admission:
            return admit_tx(
                c, workflow, params_json, context_json, execution_id, if_exists, parent, at
            )

        return self.write(tx)

    def get(self, execution_id: str) -> Record | None:
        return load(self.reader(), execution_id)

    # -- wakes and deliveries ---------------------------------------------------------------

    def request_wake(
        self, execution_id: str, at: float | None = None, *, now: float | None = None,
        reason: str = "requested",
    ) -> str:
        t = self._now(now)
        due = t if at is None else check_time(at, "the wake time")
        return self.write(lambda c: request_wake_tx(c, execution_id, due, t, reason))

    def claim_due(
        self, now: float | None = None, limit: int = 10, lease_seconds: float | None = None
    ) -> list[Delivery]:
        t = self._now(now)
        lease = self.lease_seconds if lease_seconds is None else lease_seconds
        return self.write(lambda c: claim_due_tx(c, t, limit, lease))

    def release_expired(self, now: float | None = None) -> list[str]:
        """Recovery's first step: every expired lease is released, its wakes pending again."""
        t = self._now(now)
        return self.write(lambda c: release_expired_tx(c, t, limit=None))

    def renew(
        self, execution_id: str, token: str, *, now: float | None = None,
        lease_seconds: float | None = None,
    ) -> float:
        t = self._now(now)
        expires = t + (self.lease_seconds if lease_seconds is None else lease_seconds)

        def tx(c: sqlite3.Connection) -> float:
            check_lease(c, execution_id, token, t)
            c.execute(
                "UPDATE executions SET lease_expires_at=? WHERE execution_id=?",
                (expires, execution_id),
            )
            return expires

        return self.write(tx)

    def release(
        self, execution_id: str, token: str, *, retry_at: float | None = None,
        reason: str = "retry", now: float | None = None, detail: str | None = None,
    ) -> None:
        """An infrastructure failure: no outcome; the covered wakes become due at retry_at."""
        t = self._now(now)

        def tx(c: sqlite3.Connection) -> None:
            check_lease(c, execution_id, token, t)
            record = load(c, execution_id, payload=False)
            assert record is not None
            data: dict[str, Any] = {"reason": reason, "retry_at": retry_at or t}
            if detail:
                data["detail"] = detail[-2000:]
            append(c, record, [Event(RELEASED, t, data)])
            clear_lease(c, execution_id)

        self.write(tx)

    def acknowledge(
        self, execution_id: str, token: str, outcome: dict[str, Any], *, now: float | None = None
    ) -> dict[str, Any]:
        t = self._now(now)
        event = outcome_event(outcome, t)
        return self.write(lambda c: acknowledge_tx(c, execution_id, token, event, t))

    def cancel(self, execution_id: str, *, now: float | None = None) -> bool:
        """Request cancellation (attached children too); False when nothing changed."""
        from ys.store.starts import cancel_tx

        t = self._now(now)
        return self.write(lambda c: cancel_tx(c, execution_id, t))

    # -- housekeeping ------------------------------------------------------------------------

    def gc(self, older_than: float, *, dry_run: bool = False,
           now: float | None = None) -> builtins.list[str]:
        """Prune terminal executions last changed more than `older_than` seconds ago; returns
        their IDs (what would go, with dry_run). Effect records always stay."""
        from ys.store import gc

        cutoff = self._now(now) - older_than
        ids = gc.candidates(self.reader(), cutoff)
        if dry_run:
            return ids
        for i in range(0, len(ids), gc.BATCH):
            batch = ids[i:i + gc.BATCH]
            self.write(lambda c, b=batch: gc.prune_tx(c, b))  # type: ignore[misc]
        return ids

    def setting(self, key: str) -> str | None:
        row = self.reader().execute("SELECT value FROM settings WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else None

    def set_setting(self, key: str, value: str) -> None:
        self.write(lambda c: c.execute(
            "INSERT INTO settings (key, value) VALUES (?,?) ON CONFLICT (key) DO UPDATE SET "
            "value=excluded.value", (key, value)))

    # -- schedules ---------------------------------------------------------------------------

    def schedule_add(self, name: str, workflow: str, cron_expr: str, *, tz: str = "local",
                     params: Any = None, catch_up: str = "once", overlap: str = "skip",
                     max_late: float | None = None, jitter: float = 0.0, source: str = "cli",
                     replace: bool = False, now: float | None = None) -> dict[str, Any]:
        from ys.store import schedules

        schedules.check(name, workflow, cron_expr, tz, catch_up, overlap, max_late, jitter)
        t = self._now(now)
        return self.write(lambda c: schedules.upsert_tx(
            c, name=name, workflow=workflow, expr=cron_expr, tz=tz, params=params,
            catch_up=catch_up, overlap=overlap, max_late=max_late, jitter=jitter,
            source=source, now=t, replace=replace))

    def schedules(self) -> builtins.list[dict[str, Any]]:
        from ys.store import schedules

        return schedules.list_all(self.reader())

    def schedule(self, name: str) -> dict[str, Any]:
        from ys.store import schedules

        return schedules.get(self.reader(), name)

    def schedule_remove(self, name: str) -> None:
        from ys.store import schedules

        self.write(lambda c: schedules.remove_tx(c, name))

    def schedule_pause(self, name: str, paused: bool, *,
                       now: float | None = None) -> dict[str, Any]:
        from ys.store import schedules

        t = self._now(now)
        return self.write(lambda c: schedules.pause_tx(c, name, paused, t))

    def schedule_tick(self, name: str, *, now: float | None = None) -> builtins.list[dict[str, Any]]:
        """Fire what is due for one schedule (admissions and the cursor in one transaction)."""
        from ys.store import schedules

        t = self._now(now)
        return self.write(lambda c: schedules.tick_tx(c, name, t))

    # -- durable values and their waiters ----------------------------------------------------

    def store_put(self, key: str, value: Any, expected_version: int | None = None, *,
                  now: float | None = None) -> dict[str, Any]:
        """Commit a new version (compare-and-set with expected_version; 0 = must not exist)
        and, in the same transaction, wake every execution waiting on the key."""
        from ys.store.kv import check_key, encode_value, put_tx

        check_key(key)
        value_json = encode_value(value)
        t = self._now(now)
        return self.write(lambda c: put_tx(c, key, value_json, expected_version, t))

    def store_get(self, key: str) -> dict[str, Any] | None:
        from ys.store.kv import get

        return get(self.reader(), key)

    def store_list(self, prefix: str = "") -> builtins.list[dict[str, Any]]:
        from ys.store.kv import list_keys

        return list_keys(self.reader(), prefix)

    def store_delete(self, key: str, *, now: float | None = None) -> bool:
        from ys.store.kv import delete_tx

        t = self._now(now)
        return self.write(lambda c: delete_tx(c, key, t))

    def store_wait(self, key: str, execution_id: str, step_key: str, seen: int = 0,
                   timeout_at: float | None = None, *,
                   now: float | None = None) -> dict[str, Any] | None:
        from ys.store.kv import check_key, wait_tx

        check_key(key)
        t = self._now(now)
        return self.write(
            lambda c: wait_tx(c, key, execution_id, step_key, seen, timeout_at, t)
        )

    def waits(self, execution_id: str) -> builtins.list[dict[str, Any]]:
        """What an execution waits on: store keys and effects."""
        from ys.store.kv import waits_of

        c = self.reader()
        out = waits_of(c, execution_id)
        out += [
            {"kind": "effect", "effect_id": r[0], "step_key": r[1], "wake_at": r[2]}
            for r in c.execute(
                "SELECT effect_id, step_key, wake_at FROM effect_waiters WHERE execution_id=?",
                (execution_id,),
            ).fetchall()
        ]
        return out

    # -- effects (RFC 004) ------------------------------------------------------------------

    def effect_begin(self, operation: str, effect_id: str, input: Any, execution_id: str,
                     step_key: str, *, now: float | None = None) -> dict[str, Any]:
        """{"status": "new" | "pending"} or {"status": "settled", "result": <canonical>};
        raises WorkflowEffectError (INVALID_EFFECT_REQUEST, EFFECT_REQUEST_MISMATCH)."""
        from ys.store.base import check_request
        from ys.store.effects import begin_tx

        input_json = check_request(effect_id, operation, input)
        t = self._now(now)
        return self.write(
            lambda c: begin_tx(c, operation, effect_id, input_json, execution_id, step_key, t)
        )

    def effect_settle(self, operation: str, effect_id: str, result_json: str, *,
                      now: float | None = None) -> dict[str, Any]:
        """Settle once; a different later result is kept as a conflict report."""
        from ys.store.effects import settle_tx

        # Must be durable text; compared and stored in its canonical form, so equal results
        # never conflict because of key order or white space.
        result_json = codec.dumps(codec.decode(result_json))
        t = self._now(now)
        return self.write(lambda c: settle_tx(c, operation, effect_id, result_json, t))

    def effect_wait(self, effect_id: str, execution_id: str, step_key: str, wake_at: float, *,
                    now: float | None = None) -> float:
        from ys.store.effects import wait_tx

        t = self._now(now)
        return self.write(lambda c: wait_tx(c, effect_id, execution_id, step_key, wake_at, t))

    def effect(self, effect_id: str) -> dict[str, Any] | None:
        from ys.store.effects import describe_effect

        return describe_effect(self.reader(), effect_id)

    def effects(self, status: str | None = None,
                execution_id: str | None = None) -> builtins.list[dict[str, Any]]:
        from ys.store.effects import list_effects

        return list_effects(self.reader(), status, execution_id)

    # -- starts (RFC 003) -------------------------------------------------------------------

    def start(
        self, caller_id: str, step_key: str, workflow: str, params: Any = None, *,
        detached: bool = False, now: float | None = None,
    ) -> str:
        """Start a child once per (caller, step key); returns the target's execution ID.
        Raises WorkflowStartError (INVALID_START_PARAMETERS, START_REQUEST_MISMATCH)."""
        from ys.store.starts import request_params, start_tx, validate_start

        validate_start(step_key, workflow)
        params_json = request_params(params)
        t = self._now(now)
        return self.write(
            lambda c: start_tx(c, caller_id, step_key, workflow, params_json, detached, t)
        )

    # -- steps ------------------------------------------------------------------------------

    def save_step(
        self, execution_id: str, token: str, key: str, *, kind: str, status: str,
        value: str | None, attempts: int = 1, wake_at: float | None = None,
        now: float | None = None,
    ) -> bool:
        """Fenced by the delivery token; a wake_at is requested in the same transaction.
        Returns whether a cancellation has been requested (the worker's next step raises)."""
        t = self._now(now)
        if wake_at is not None:
            check_time(wake_at, "the step's wake time")

        def tx(c: sqlite3.Connection) -> bool:
            return save_step_tx(
                c, execution_id, token, key, kind, status, value, attempts, wake_at, t
            )

        return self.write(tx)

    def delivery_state(
        self, execution_id: str, token: str, *, now: float | None = None
    ) -> tuple[Record, list[StepRecord]]:
        """What a worker needs to run: the record and the saved steps, if it holds the lease.
        A terminal record is returned to any caller (its outcome is final)."""
        t = self._now(now)
        c = self.reader()
        c.execute("BEGIN")
        try:
            record = load(c, execution_id)
            if record is None:
                raise NotFound("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
            if not record.terminal:
                row = c.execute(
                    "SELECT lease_token, lease_expires_at FROM executions WHERE execution_id=?",
                    (execution_id,),
                ).fetchone()
                if row[0] != token or row[1] is None or row[1] <= t:
                    raise LeaseLost("LEASE_LOST", f"this delivery of {execution_id!r} has no lease")
            return record, reads.steps(c, execution_id)
        finally:
            c.execute("COMMIT")

    def held_leases(self) -> list[tuple[str, str]]:
        """(execution ID, token) of every lease currently held, expired or not."""
        rows = self.reader().execute(
            "SELECT execution_id, lease_token FROM executions WHERE lease_token IS NOT NULL"
        ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def steps(self, execution_id: str) -> list[StepRecord]:
        return reads.steps(self.reader(), execution_id)

    # -- reads ------------------------------------------------------------------------------

    def events(self, execution_id: str) -> list[Event]:
        return reads.events(self.reader(), execution_id)

    def history(
        self, execution_id: str, limit: int = DEFAULT_PAGE, page_token: str | None = None
    ) -> Page:
        return reads.history(self.reader(), execution_id, limit, page_token)

    def list(
        self, *, statuses: builtins.list[str] | None = None, workflow: str | None = None,
        parent: str | None = None, limit: int = DEFAULT_PAGE, page_token: str | None = None,
    ) -> Page:
        return reads.list_executions(
            self.reader(), statuses=statuses, workflow=workflow, parent=parent,
            limit=limit, page_token=page_token,
        )

    def describe(self, execution_id: str) -> Description:
        return reads.describe(self.reader(), execution_id)

    def verify(self) -> builtins.list[str]:
        return reads.verify(self.reader())

    def next_due_at(self) -> float | None:
        """The earliest time anything becomes claimable (a due wake or a lease expiry)."""
        return reads.next_due_at(self.reader())


# -- transaction bodies (shared by the adapter's methods and by later clients) ---------------


def encode_event_value(value: Any, path: str) -> str:
    enc = codec.encode(value, path=path)
    if enc.status != "encoded":
        raise ExecutionAdmissionError("INVALID_EXECUTION_EVENT", enc.message or "invalid value")
    assert enc.canonical is not None
    return enc.canonical


def admit_tx(
    c: sqlite3.Connection, workflow: str, params_json: str, context_json: str,
    execution_id: str | None, if_exists: str, parent: dict[str, Any] | None, at: float,
) -> Admission:
    if execution_id is None:
        # No look-up first: the executions row is inserted before the events (see `append`),
        # so the rare duplicate (48 random bits) fails on the primary key with nothing
        # written, and another ID is drawn. Saves a query per admission.
        while True:
            candidate = f"{workflow}-{secrets.token_hex(6)}"
            try:
                return _admit_new(c, candidate, workflow, params_json, context_json, parent, at)
            except sqlite3.IntegrityError as exc:
                if "executions.execution_id" not in str(exc):
                    raise
    else:
        row = c.execute(
            "SELECT workflow, params, context, status FROM executions WHERE execution_id=?",
            (execution_id,),
        ).fetchone()
        if row is not None:
            same = row[0] == workflow and row[1] == params_json and row[2] == context_json
            if if_exists == "use-existing" and same:
                return Admission(execution_id, started=False)
            why = "" if if_exists == "fail" else " with a different workflow, params or context"
            raise ExecutionAdmissionError(
                "EXECUTION_ID_CONFLICT",
                f"{execution_id} already exists{why} ({row[3]})",
                execution_id=execution_id, status=row[3],
            )
    return _admit_new(c, execution_id, workflow, params_json, context_json, parent, at)


def _admit_new(
    c: sqlite3.Connection, execution_id: str, workflow: str, params_json: str,
    context_json: str, parent: dict[str, Any] | None, at: float,
) -> Admission:
    data: dict[str, Any] = {
        "execution_id": execution_id,
        "workflow": workflow,
        "params": RawJSON(params_json),
        "context": RawJSON(context_json),
    }
    if parent is not None:
        data["parent"] = parent
    append(c, None, [Event(ADMITTED, at, data)])
    return Admission(execution_id, started=True)


def request_wake_tx(
    c: sqlite3.Connection, execution_id: str, due: float, now: float, reason: str = "requested"
) -> str:
    record = load(c, execution_id, payload=False)
    if record is None:
        raise NotFound("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
    if record.terminal:
        return "ignored"
    if record.due_at is not None and record.due_at <= due:
        return "requested"  # merges into an earlier pending wake: nothing changes
    append(c, record, [Event(WAKE_REQUESTED, now, {"due_at": due, "reason": reason})])
    return "requested"


def clear_lease(c: sqlite3.Connection, execution_id: str) -> None:
    c.execute(
        "UPDATE executions SET lease_token=NULL, lease_expires_at=NULL WHERE execution_id=?",
        (execution_id,),
    )


def release_expired_tx(c: sqlite3.Connection, now: float, limit: int | None) -> builtins.list[str]:
    rows = c.execute(
        "SELECT execution_id FROM executions WHERE lease_token IS NOT NULL "
        "AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT ?",
        (now, -1 if limit is None else limit),
    ).fetchall()
    released = []
    for (execution_id,) in rows:
        record = load(c, execution_id, payload=False)
        assert record is not None
        append(c, record, [Event(RELEASED, now, {"reason": "lease_expired", "retry_at": now})])
        clear_lease(c, execution_id)
        released.append(execution_id)
    return released


def claim_due_tx(c: sqlite3.Connection, now: float, limit: int, lease: float) -> builtins.list[Delivery]:
    release_expired_tx(c, now, limit=max(limit, 16))
    rows = c.execute(
        "SELECT execution_id FROM executions WHERE due_at <= ? AND lease_token IS NULL "
        "ORDER BY due_at, execution_id LIMIT ?",
        (now, limit),
    ).fetchall()
    out = []
    for (execution_id,) in rows:
        record = load(c, execution_id, payload=False)
        assert record is not None and not record.terminal
        token = secrets.token_hex(16)
        expires = now + lease
        record = append(c, record, [Event(CLAIMED, now, {"attempt": record.attempts + 1})])
        c.execute(
            "UPDATE executions SET lease_token=?, lease_expires_at=? WHERE execution_id=?",
            (token, expires, execution_id),
        )
        out.append(Delivery(execution_id, token, record.attempts, expires, record.workflow))
    return out


def outcome_event(outcome: dict[str, Any], at: float) -> Event:
    """Validate a WorkflowRunOutcome and turn it into the event that records it."""
    status = outcome.get("status")
    if status == "suspended":
        return Event(SUSPENDED, at, {})
    if status == "completed":
        result = outcome.get("result")
        enc = codec.encode(result, path="result")
        if enc.status != "encoded" or isinstance(result, codec.ErrorValue):
            raise InvalidArgument("INVALID_ARGUMENT", enc.message or "invalid result")
        # Results are stored as plain JSON (lossless for durable values without tagged errors).
        return Event(COMPLETED, at, {"result": json.loads(json.dumps(result))})
    if status == "failed":
        error = outcome.get("error") or {}
        if not isinstance(error, dict) or not isinstance(error.get("name"), str):
            raise InvalidArgument("INVALID_ARGUMENT", "a failed outcome needs error.name")
        clean = {"name": error["name"], "message": str(error.get("message", ""))}
        for extra in ("code", "traceback", "cause"):
            if error.get(extra) is not None:
                clean[extra] = error[extra]
        return Event(FAILED, at, {"error": clean})
    if status == "cancelled":
        return Event(CANCELLED, at, {})
    raise InvalidArgument("INVALID_ARGUMENT", f"unknown outcome status {status!r}")


def acknowledge_tx(
    c: sqlite3.Connection, execution_id: str, token: str, event: Event, now: float
) -> dict[str, Any]:
    record = load(c, execution_id, payload=False)
    if record is None:
        raise NotFound("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
    if record.terminal:
        assert record.outcome is not None
        return record.outcome  # terminal outcomes are immutable: the first one wins
    check_lease(c, execution_id, token, now)
    record = append(c, record, [event])
    clear_lease(c, execution_id)
    if record.terminal and record.parent is not None:
        wake_waiting_parent(c, record, now)
    return record.outcome if record.outcome is not None else {"status": "suspended"}


def wake_waiting_parent(c: sqlite3.Connection, child: Record, now: float) -> None:
    """A caller blocked in step.call on this child is woken in the child's final transaction."""
    assert child.parent is not None
    parent_id, key = child.parent["execution_id"], child.parent["step_key"]
    waiting = c.execute(
        "SELECT 1 FROM steps WHERE execution_id=? AND key=? AND status='waiting'",
        (parent_id, key),
    ).fetchone()
    if waiting is not None:
        request_wake_tx(c, parent_id, now, now, reason=f"child {child.execution_id} ended")


def save_step_tx(
    c: sqlite3.Connection, execution_id: str, token: str, key: str, kind: str, status: str,
    value: str | None, attempts: int, wake_at: float | None, now: float,
) -> bool:
    check_lease(c, execution_id, token, now)
    record = load(c, execution_id, payload=False)
    assert record is not None
    if kind == "call" and status == "waiting":
        # The child may have ended before this step said it waits: then nobody would wake us.
        child = c.execute(
            "SELECT e.status FROM start_requests s JOIN executions e ON e.execution_id=s.target_id"
            " WHERE s.caller_id=? AND s.step_key=?",
            (execution_id, key),
        ).fetchone()
        if child is not None and child[0] in TERMINAL:
            wake_at = now
    c.execute(
        "INSERT INTO steps (execution_id, key, kind, status, value, attempts, wake_at, updated_at, "
        "first_seq) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (execution_id, key) DO UPDATE SET kind=excluded.kind, "
        "status=excluded.status, value=excluded.value, attempts=excluded.attempts, "
        "wake_at=excluded.wake_at, updated_at=excluded.updated_at",
        (execution_id, key, kind, status, value, attempts, wake_at, now,
         record.history_length + 1),
    )
    data: dict[str, Any] = {"key": key, "kind": kind, "status": status}
    if attempts != 1:
        data["attempts"] = attempts
    if wake_at is not None:
        data["wake_at"] = wake_at
    append(c, record, [Event(STEP, now, data)])
    return record.cancel_requested


__all__ = ["SqliteStore", "TERMINAL"]
