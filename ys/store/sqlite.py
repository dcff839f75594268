"""The SQLite adapter: RFC 001's execution client, leases, and step records.

Every write runs through the Writer (its own transaction, or its share of a group commit),
computes events, folds them with `apply`, and persists events and projection together. An
admission computes its rows before the transaction (`_admission`), so that the group writer
can insert a batch of them with one statement per table.

`SqliteStore` holds the execution client here (admission, wakes, deliveries, starts, steps,
reads); its other method groups live beside their SQL and are mixed in: effects
(`effects.EffectMethods`), durable values (`kv.KvMethods`), schedules
(`schedules.ScheduleMethods`) and housekeeping (`gc.HousekeepingMethods`). The transaction
bodies are in `executions` and are re-exported here.
"""

from __future__ import annotations

import builtins
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ys import codec
from ys.errors import InvalidArgument, LeaseLost, NotFound
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
    check_object,
    check_time,
    check_workflow_name,
)
from ys.store.db import Inserts, Writer, connect
from ys.store.effects import EffectMethods
from ys.store.executions import (  # noqa: F401 - re-exported: other clients and bench use them
    _FULL,
    _LIGHT,
    _RECORD_COLUMNS,
    acknowledge_tx,
    admission_inserts,
    admit_tx,
    append,
    check_lease,
    claim_due_tx,
    clear_lease,
    encode_event_value,
    event_text,
    load,
    new_execution_id,
    outcome_event,
    release_expired_tx,
    request_wake_tx,
    row_to_record,
    save_step_tx,
    wake_waiting_parent,
)
from ys.store.gc import HousekeepingMethods
from ys.store.kv import KvMethods
from ys.store.observing import ObservingMethods
from ys.store.overview import OverviewMethods
from ys.store.records import RELEASED, TERMINAL, Event, Record
from ys.store.schedules import ScheduleMethods
from ys.store.schema import migrate

T = TypeVar("T")
DEFAULT_LEASE_SECONDS = 30.0


class SqliteStore(EffectMethods, KvMethods, ScheduleMethods, HousekeepingMethods,
                  OverviewMethods, ObservingMethods):
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
        # workflow -> its current script version (`scripts`, which only set_script writes):
        # an admission's rows are computed before its transaction, without a look-up
        self._scripts: dict[str, str] = dict(
            conn.execute("SELECT workflow, sha256 FROM scripts").fetchall())
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
        if self._writer.close():  # else the writer is still in a transaction: leave it be
            self._writer.conn.close()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()

    def _now(self, now: float | None) -> float:
        """The time of a write: the clock's, or the caller's `now` (checked like every time
        the store is given)."""
        return self.clock() if now is None else check_time(now, "now")

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
        return self._writer.write(*self._admission(
            workflow, params, context, execution_id, if_exists, parent, now
        ))

    async def admit_async(
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
        """`admit` for the daemon's event loop: checked and encoded here, committed by the
        group writer with the other admissions of its batch, answered with one wake-up."""
        return await self._writer.write_async(*self._admission(
            workflow, params, context, execution_id, if_exists, parent, now
        ))

    def _admission(
        self, workflow: str, params: Any, context: dict[str, Any] | None,
        execution_id: str | None, if_exists: str, parent: dict[str, Any] | None,
        now: float | None,
    ) -> tuple[Callable[[sqlite3.Connection], Admission], Inserts, Admission]:
        """An admission checked and prepared: its transaction body, and its rows computed as
        if the ID were unused (the common case), so that the group writer can insert many
        admissions at once; if the ID is taken, the body runs and decides."""
        check_workflow_name(workflow)
        if execution_id is not None:
            check_execution_id(execution_id)
        if if_exists not in ("fail", "use-existing"):
            raise InvalidArgument(
                "INVALID_ARGUMENT", f"if_exists must be 'fail' or 'use-existing', not {if_exists!r}"
            )
        check_object(params, "params")
        check_object(context, "context")
        params_json = encode_event_value({} if params is None else params, "params")
        if len(params_json.encode("utf-8")) > MAX_PARAMS_BYTES:
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                f"params are {len(params_json.encode())} bytes encoded; the limit is 2 MiB",
            )
        context_json = encode_event_value(context, "context") if context else "{}"
        at = check_time(self._now(now), "the admission time")  # the clock's reading too

        def tx(c: sqlite3.Connection) -> Admission:
            return admit_tx(
                c, workflow, params_json, context_json, execution_id, if_exists, parent, at
            )

        new_id = new_execution_id(workflow, at) if execution_id is None else execution_id
        sha = self._scripts.get(workflow)
        inserts = admission_inserts(new_id, workflow, params_json, context_json, parent, at,
                                    sha)
        return tx, inserts, Admission(new_id, started=True)

    def get(self, execution_id: str) -> Record | None:
        return load(self.reader(), execution_id)

    # -- wakes and deliveries ---------------------------------------------------------------

    def request_wake(
        self, execution_id: str, at: float | None = None, *, now: float | None = None,
        reason: str = "requested",
    ) -> str:
        t = self._now(now)
        due = t if at is None else check_time(at, "at (the wake time)")
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
        return self.write(self._renew(execution_id, token, now, lease_seconds))

    async def renew_async(
        self, execution_id: str, token: str, *, now: float | None = None,
        lease_seconds: float | None = None,
    ) -> float:
        return await self._writer.write_async(
            self._renew(execution_id, token, now, lease_seconds))

    def _renew(
        self, execution_id: str, token: str, now: float | None, lease_seconds: float | None
    ) -> Callable[[sqlite3.Connection], float]:
        t = self._now(now)
        expires = t + (self.lease_seconds if lease_seconds is None else lease_seconds)

        def tx(c: sqlite3.Connection) -> float:
            check_lease(c, execution_id, token, t)
            c.execute(
                "UPDATE executions SET lease_expires_at=? WHERE execution_id=?",
                (expires, execution_id),
            )
            return expires

        return tx

    def release(
        self, execution_id: str, token: str, *, retry_at: float | None = None,
        reason: str = "retry", now: float | None = None, detail: str | None = None,
    ) -> None:
        """An infrastructure failure: no outcome; the covered wakes become due at retry_at."""
        t = self._now(now)
        retry = check_time(retry_at, "retry_at") if retry_at else t

        def tx(c: sqlite3.Connection) -> None:
            check_lease(c, execution_id, token, t)
            record = load(c, execution_id, payload=False)
            assert record is not None
            data: dict[str, Any] = {"reason": reason, "retry_at": retry}
            if detail:
                data["detail"] = detail[-2000:]
            append(c, record, [Event(RELEASED, t, data)])
            clear_lease(c, execution_id)

        self.write(tx)

    def acknowledge(
        self, execution_id: str, token: str, outcome: dict[str, Any], *,
        now: float | None = None, on_failure: str | None = None,
    ) -> dict[str, Any]:
        """Record the outcome; a failure admits the `on_failure` workflow in the same
        transaction (`<ID>.on-failure`, ys.store.handlers)."""
        return self.write(self._acknowledge(execution_id, token, outcome, now, on_failure))

    async def acknowledge_async(
        self, execution_id: str, token: str, outcome: dict[str, Any], *,
        now: float | None = None, on_failure: str | None = None,
    ) -> dict[str, Any]:
        return await self._writer.write_async(
            self._acknowledge(execution_id, token, outcome, now, on_failure))

    def _acknowledge(
        self, execution_id: str, token: str, outcome: dict[str, Any], now: float | None,
        on_failure: str | None,
    ) -> Callable[[sqlite3.Connection], dict[str, Any]]:
        t = self._now(now)
        event = outcome_event(outcome, t)
        if on_failure is not None:
            check_workflow_name(on_failure)
        return lambda c: acknowledge_tx(c, execution_id, token, event, t, on_failure)

    def cancel(self, execution_id: str, *, now: float | None = None) -> bool:
        """Request cancellation (attached children too); False when nothing changed."""
        from ys.store.starts import cancel_tx

        t = self._now(now)
        return self.write(lambda c: cancel_tx(c, execution_id, t))

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
        return self.write(self._save_step(
            execution_id, token, key, kind, status, value, attempts, wake_at, now))

    async def save_step_async(
        self, execution_id: str, token: str, key: str, *, kind: str, status: str,
        value: str | None, attempts: int = 1, wake_at: float | None = None,
        now: float | None = None,
    ) -> bool:
        """`save_step` for the daemon's event loop (see `admit_async`)."""
        return await self._writer.write_async(self._save_step(
            execution_id, token, key, kind, status, value, attempts, wake_at, now))

    def _save_step(
        self, execution_id: str, token: str, key: str, kind: str, status: str,
        value: str | None, attempts: int, wake_at: float | None, now: float | None,
    ) -> Callable[[sqlite3.Connection], bool]:
        if kind == "run" and value is not None:
            codec.check_size(value, f"step {key!r} value")  # the SDK checks it before sending
        t = self._now(now)
        if wake_at is not None:
            wake_at = check_time(wake_at, "wake_at")

        def tx(c: sqlite3.Connection) -> bool:
            return save_step_tx(
                c, execution_id, token, key, kind, status, value, attempts, wake_at, t
            )

        return tx

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


__all__ = ["SqliteStore", "TERMINAL"]
