"""A daemon stopped inside a write transaction does not stall the others (docs/design.md, "On
PostgreSQL"): the server ends a writer's session left idle in its transaction (so the event
log's lock it holds is freed), and a write that waited too long for a lock is tried again,
not failed."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg

from ys.store.postgres import writer
from ys.store.postgres.schema import EVENT_LOG_LOCK


def test_a_writer_stopped_mid_transaction_does_not_hold_the_other_daemons_writes(daemons):
    stopped, other = daemons(2)
    inside, go_on = threading.Event(), threading.Event()
    runs: list[int] = []
    answer: list[Any] = []

    def frozen(c: Any) -> str:
        # the transaction holds the event log's lock once its first answer came back; then
        # its client stops (a SIGSTOPped daemon, as the server sees it)
        runs.append(1)
        c.execute("SELECT 1").fetchone()
        inside.set()
        go_on.wait(30)
        c.execute("SELECT 2").fetchone()
        return "written"

    def run() -> None:
        try:
            answer.append(stopped.core.write(frozen))
        except Exception as exc:
            answer.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    release = threading.Timer(writer.IDLE_IN_TRANSACTION_SECONDS + 6, go_on.set)
    release.start()
    try:
        assert inside.wait(10)
        t0 = time.monotonic()
        other.admit("w", {}, execution_id="w-1")
        waited = time.monotonic() - t0
    finally:
        go_on.set()
        release.cancel()
        thread.join(30)
    assert waited < writer.IDLE_IN_TRANSACTION_SECONDS + 2, waited
    assert other.get("w-1") is not None
    # the stopped writer, resumed, finds its session ended and runs its batch again
    assert answer == ["written"] and len(runs) == 2, (answer, runs)


def test_a_write_that_timed_out_on_a_lock_is_tried_again(daemons, pg_url, monkeypatch):
    monkeypatch.setattr(writer, "LOCK_TIMEOUT_SECONDS", 0.5)
    (store,) = daemons(1)
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("BEGIN")
        holder.execute(f"SELECT pg_advisory_xact_lock({int(EVENT_LOG_LOCK)})")
        free = threading.Timer(1.5, lambda: holder.execute("ROLLBACK"))
        free.start()
        try:
            t0 = time.monotonic()
            store.admit("w", {}, execution_id="w-1")
            waited = time.monotonic() - t0
        finally:
            free.join(10)
    assert waited >= 1.0, waited  # it waited past a lock timeout or two
    assert store.get("w-1") is not None
