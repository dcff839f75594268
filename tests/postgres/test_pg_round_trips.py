"""One round trip per durable operation on PostgreSQL (docs/design.md, "On PostgreSQL"): a
step save, a suspension, an outcome, an admission and a claim are each one request to the
server plus its commit. Counted, not timed: libpq's trace of the writer's connection records
every message each way, and a round trip is each time the client, having sent, reads the
server's answer."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable
from typing import Any

import pytest

from tests.support import T0
from ys.outcomes import outcome_of
from ys.store.postgres import PostgresStore
from ys.values import StepWrite

DONE = {"status": "completed", "result": None}


def round_trips(trace: str) -> int:
    """How many times the client waited on the server: each turn from frontend (F) messages
    to backend (B) ones in libpq's trace."""
    turns, last = 0, "B"
    for line in trace.splitlines():
        side = line.split("\t", 1)[0]
        if side == "B" and last == "F":
            turns += 1
        if side in ("F", "B"):
            last = side
    return turns


def counted(store: PostgresStore, operation: Callable[[], Any]) -> int:
    """The round trips `operation` costs on the store's writer connection."""
    from psycopg import pq

    conn = store.core.writer.conn
    with tempfile.TemporaryFile("w+") as f:
        conn.pgconn.trace(f.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            operation()
        finally:
            conn.pgconn.untrace()
        f.seek(0)
        text = os.read(f.fileno(), 1 << 24).decode()
    return round_trips(text)


@pytest.fixture
def store(daemons) -> PostgresStore:
    return daemons(1)[0]


def test_each_durable_operation_is_one_request_plus_its_commit(store):
    costs: dict[str, int] = {}
    costs["admission"] = counted(store, lambda: store.admit("w", {}, execution_id="w-1"))
    claimed: list[Any] = []
    costs["claim"] = counted(store, lambda: claimed.extend(store.claim_due(now=T0, limit=1)))
    (d,) = claimed
    costs["step save"] = counted(
        store,
        lambda: store.save_step(
            d.execution_id, d.token, "s1", StepWrite("step", "completed", "1"), now=T0
        ),
    )
    answers: list[Any] = []
    costs["suspension"] = counted(
        store,
        lambda: store.suspend_then(
            lambda r, e: answers.append((r, e)),
            d.execution_id,
            d.token,
            "nap",
            StepWrite("sleep", "waiting", None, wake_at=T0 + 1),
        ),
    )
    assert answers and answers[0][1] is None, answers
    (d,) = store.claim_due(now=T0 + 2, limit=1)
    costs["outcome"] = counted(
        store, lambda: store.acknowledge(d.execution_id, d.token, outcome_of(DONE), now=T0 + 2)
    )
    # One statement whose answer the operation waits for (a worker's write: the row, fenced
    # and locked, with what the write decides on; an admission: its INSERT, which reads the
    # script version and returns it; a claim: the expired leases it sweeps and the due rows,
    # asked together), then the writes and COMMIT in one batch (a claim's read of the claimed
    # executions' steps with them: ys/store/sql/claims.py).
    assert costs == {
        "admission": 2,
        "claim": 2,
        "step save": 2,
        "suspension": 2,
        "outcome": 2,
    }, costs


def test_an_admission_that_claims_its_execution_costs_three_round_trips(store):
    """The daemon's admission on a free slot (its execution claimed in the same transaction):
    the INSERT, one question for the claim (the row, its script's limit and whether its
    workflow is paused, together), then the writes and COMMIT; a new execution's steps are
    not read (it has none). The first line of a trigger waits for it."""
    admitted: list[Any] = []

    def admit() -> None:
        admitted.append(asyncio.run(store.admit_async("w", {"n": 1}, lease_seconds=30)))

    cost = counted(store, admit)
    (a,) = admitted
    assert a.started and a.delivery is not None and a.delivery.attempt == 1
    assert a.delivery.state.steps == [] and a.delivery.state.params_json == '{"n":1}'
    assert cost == 3, cost
