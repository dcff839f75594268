"""Concurrency limits with three daemons on one PostgreSQL database (three stores, each its
own writer, pool and lease holder), claiming at once: at most N leases per slot group, ever.
The test asserts an invariant (the most leases of one account any daemon saw held at once),
never a time."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support import T0, Threads
from ys.store.base import ConcurrencyLimit
from ys.store.postgres import PostgresStore

LEASE = 30.0
DONE = {"status": "completed", "result": None}


@pytest.fixture
def daemons(pg_url: str) -> Iterator[Callable[..., list[PostgresStore]]]:
    opened: list[PostgresStore] = []

    def open_(n: int = 3, **options: Any) -> list[PostgresStore]:
        options.setdefault("clock", lambda: T0)
        stores = [PostgresStore(pg_url, daemon_id=f"d{i}", **options) for i in range(n)]
        opened.extend(stores)
        return stores

    yield open_
    for s in opened:
        s.close()


def test_three_daemons_claiming_at_once_hold_at_most_one_lease_per_account(daemons):
    stores = daemons(3, group_commit=True)
    accounts = ("acme", "globex")
    for i in range(24):
        stores[i % 3].admit("pay", {"account": accounts[i % 2]}, execution_id=f"pay-{i:02}")
    limits = {"pay": ConcurrencyLimit(1, key="account")}
    lock = threading.Lock()
    held: Counter[str] = Counter()
    most: Counter[str] = Counter()
    done: list[str] = []

    def account(execution_id: str) -> str:
        return accounts[int(execution_id.rsplit("-", 1)[1]) % 2]

    def drain(i: int) -> None:
        deadline = time.monotonic() + 60
        while len(done) < 24 and time.monotonic() < deadline:
            batch = stores[i].claim_due(now=T0, limit=2, lease_seconds=LEASE, limits=limits)
            with lock:  # counted after the claim committed, uncounted before the outcome
                for d in batch:
                    held[account(d.execution_id)] += 1
                    most[account(d.execution_id)] = max(
                        most[account(d.execution_id)], held[account(d.execution_id)]
                    )
            for d in batch:
                with lock:
                    held[account(d.execution_id)] -= 1
                stores[i].acknowledge(d.execution_id, d.token, DONE)
                with lock:
                    done.append(d.execution_id)

    results = Threads(3, drain).results()
    assert all(r is None for r in results), results
    assert sorted(done) == [f"pay-{i:02}" for i in range(24)]  # each once
    assert dict(most) == dict.fromkeys(accounts, 1)
