"""`SqliteStore`: the store's clients over one SQLite file, composed.

Each client lives beside its SQL: executions (`execution_client`), starts, effects, values,
schedules, reads, the dashboard's reads (`overview`), housekeeping and observing (metrics'
counts, the event stream, script versions). They share one `Core` (the writer, the readers, the
clock). The store holds them as attributes (`store.execution_client`, ...) and offers each client's
methods as its own, bound once when it opens: a call through the store costs one attribute
lookup, as a method of one class would, which keeps the hot paths (admit_async,
save_step_async, claim_due) as cheap as they were.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ys.store.sqlite.core import DEFAULT_LEASE_SECONDS, Core
from ys.store.sqlite.effects import SqliteEffects
from ys.store.sqlite.execution_client import SqliteExecutions
from ys.store.sqlite.housekeeping import SqliteHousekeeping
from ys.store.sqlite.observing import SqliteObserving
from ys.store.sqlite.overview import SqliteOverview
from ys.store.sqlite.reads import SqliteReads
from ys.store.sqlite.retries import SqliteRetries
from ys.store.sqlite.schedules import SqliteSchedules
from ys.store.sqlite.starts import SqliteStarts
from ys.store.sqlite.values import SqliteValues


class SqliteStore:
    """One SQLite file, every client of `ys.store.protocols.Store` over it. Thread-safe:
    writes go through one writer, reads use per-thread connections (WAL lets them run beside
    the writer)."""

    shared = False  # one daemon owns the file (its lock says so)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        group_commit: bool = False,
        clock: Callable[[], float] = time.time,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        read_only: bool = False,
    ) -> None:
        core = Core(
            path,
            group_commit=group_commit,
            clock=clock,
            lease_seconds=lease_seconds,
            read_only=read_only,
        )
        self.core = core
        self.path = core.path
        self.clock = clock
        self.lease_seconds = lease_seconds

        ex = self.execution_client = SqliteExecutions(core)
        self.admit = ex.admit
        self.admit_async = ex.admit_async
        self.request_wake = ex.request_wake
        self.wake_workflow = ex.wake_workflow
        self.claim_due = ex.claim_due
        self.claim_due_async = ex.claim_due_async
        self.release_expired = ex.release_expired
        self.renew = ex.renew
        self.renew_async = ex.renew_async
        self.release = ex.release
        self.timed_out = ex.timed_out
        self.time_out = ex.time_out
        self.acknowledge = ex.acknowledge
        self.acknowledge_async = ex.acknowledge_async
        self.acknowledge_then = ex.acknowledge_then
        self.cancel = ex.cancel
        self.save_step = ex.save_step
        self.save_step_async = ex.save_step_async
        self.save_step_then = ex.save_step_then
        self.suspend_then = ex.suspend_then
        self.delivery_state = ex.delivery_state

        rt = self.retry_client = SqliteRetries(core)
        self.retry = rt.retry

        st = self.start_client = SqliteStarts(core)
        self.start = st.start

        ef = self.effect_client = SqliteEffects(core)
        self.effect_begin = ef.effect_begin
        self.effect_settle = ef.effect_settle
        self.effect_wait = ef.effect_wait
        self.effect = ef.effect
        self.effects = ef.effects

        va = self.value_client = SqliteValues(core)
        self.value_put = va.value_put
        self.value_get = va.value_get
        self.value_list = va.value_list
        self.value_delete = va.value_delete
        self.value_wait = va.value_wait

        sc = self.schedule_client = SqliteSchedules(core)
        self.schedule_add = sc.schedule_add
        self.schedules = sc.schedules
        self.schedule = sc.schedule
        self.schedule_remove = sc.schedule_remove
        self.schedule_pause = sc.schedule_pause
        self.schedule_tick = sc.schedule_tick

        rd = self.read_client = SqliteReads(core)
        self.get = rd.get
        self.list = rd.list
        self.history = rd.history
        self.describe = rd.describe
        self.steps = rd.steps
        self.events = rd.events
        self.waits = rd.waits
        self.next_due_at = rd.next_due_at
        self.next_times = rd.next_times
        self.slot_waits = rd.slot_waits

        ov = self.overview_client = SqliteOverview(core)
        self.running = ov.running
        self.due = ov.due
        self.failed_since = ov.failed_since
        self.count_status = ov.count_status
        self.find = ov.find
        self.value_waiters = ov.value_waiters
        self.database = ov.database
        self.schedule_slots = ov.schedule_slots
        self.activity = ov.activity
        self.schedule_history = ov.schedule_history

        hk = self.housekeeping = SqliteHousekeeping(core)
        self.gc = hk.gc
        self.setting = hk.setting
        self.set_setting = hk.set_setting
        self.held_leases = hk.held_leases
        self.release_held = hk.release_held
        self.lease_holders = hk.lease_holders
        self.due_counts = hk.due_counts
        self.verify = hk.verify
        self.health = hk.health

        ob = self.observing = SqliteObserving(core)
        self.shared_counts = ob.shared_counts
        self.event_stream = ob.event_stream
        self.set_script = ob.set_script
        self.scripts_needed = ob.scripts_needed
        self.stale_scripts = ob.stale_scripts
        self.observe_commits = ob.observe_commits
        self.keep_log_tail = ob.keep_log_tail
        self.log_tails = ob.log_tails

    def watch(
        self, on_due: Callable[[], None], on_change: Callable[[str], None] | None = None
    ) -> None:
        """Nothing to watch: this daemon is the file's only writer, so it knows every commit."""

    def close(self) -> None:
        self.core.close()


__all__ = ["SqliteStore"]
