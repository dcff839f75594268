"""`PostgresStore`: the store's clients over one PostgreSQL database that many daemons share.

Composed as `SqliteStore` is: each client beside its SQL, one `Core` (writer, read pool,
listener, clock) under them, each client's methods bound once as the store's own.
`daemon_id` names the lease holder: recovery releases only the leases its holder took.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ys.store.postgres.core import DEFAULT_LEASE_SECONDS, Core
from ys.store.postgres.effects import PgEffects
from ys.store.postgres.execution_client import PgExecutions
from ys.store.postgres.housekeeping import PgHousekeeping
from ys.store.postgres.observing import PgObserving
from ys.store.postgres.overview import PgOverview
from ys.store.postgres.reads import PgReads
from ys.store.postgres.retries import PgRetries
from ys.store.postgres.schedules import PgSchedules
from ys.store.postgres.starts import PgStarts
from ys.store.postgres.values import PgValues


class PostgresStore:
    """One PostgreSQL database. Thread-safe: writes go through one writer (a group commit
    in the daemon), reads through a pool of connections."""

    shared = True  # the daemons of many boxes write it

    def __init__(
        self,
        url: str,
        *,
        group_commit: bool = False,
        clock: Callable[[], float] = time.time,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        read_only: bool = False,
        daemon_id: str | None = None,
    ) -> None:
        core = Core(
            url,
            group_commit=group_commit,
            clock=clock,
            lease_seconds=lease_seconds,
            read_only=read_only,
            daemon_id=daemon_id,
        )
        self.core = core
        self._writer = core.writer  # the name SqliteStore gives it (the contract suite's hooks)
        self.url = url
        self.clock = clock
        self.lease_seconds = lease_seconds
        self.daemon_id = core.holder
        self.watch = core.watch

        ex = self.execution_client = PgExecutions(core)
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

        rt = self.retry_client = PgRetries(core)
        self.retry = rt.retry

        st = self.start_client = PgStarts(core)
        self.start = st.start

        ef = self.effect_client = PgEffects(core)
        self.effect_begin = ef.effect_begin
        self.effect_settle = ef.effect_settle
        self.effect_wait = ef.effect_wait
        self.effect = ef.effect
        self.effects = ef.effects

        va = self.value_client = PgValues(core)
        self.value_put = va.value_put
        self.value_get = va.value_get
        self.value_list = va.value_list
        self.value_delete = va.value_delete
        self.value_wait = va.value_wait

        sc = self.schedule_client = PgSchedules(core)
        self.schedule_add = sc.schedule_add
        self.schedules = sc.schedules
        self.schedule = sc.schedule
        self.schedule_remove = sc.schedule_remove
        self.schedule_pause = sc.schedule_pause
        self.schedule_tick = sc.schedule_tick
        self.schedule_slots = sc.schedule_slots

        rd = self.read_client = PgReads(core)
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

        hk = self.housekeeping = PgHousekeeping(core)
        self.gc = hk.gc
        self.setting = hk.setting
        self.set_setting = hk.set_setting
        self.held_leases = hk.held_leases
        self.release_held = hk.release_held
        self.lease_holders = hk.lease_holders
        self.due_counts = hk.due_counts
        self.verify = hk.verify
        self.health = hk.health

        ob = self.observing = PgObserving(core)
        self.shared_counts = ob.shared_counts
        self.event_stream = ob.event_stream
        self.set_script = ob.set_script
        self.scripts_needed = ob.scripts_needed
        self.stale_scripts = ob.stale_scripts
        self.observe_commits = ob.observe_commits
        self.keep_log_tail = ob.keep_log_tail
        self.log_tails = ob.log_tails

        ov = self.overview = PgOverview(core)
        self.running = ov.running
        self.due = ov.due
        self.failed_since = ov.failed_since
        self.count_status = ov.count_status
        self.find = ov.find
        self.value_waiters = ov.value_waiters
        self.database = ov.database
        self.activity = ov.activity
        self.schedule_history = ov.schedule_history

    def close(self) -> None:
        self.core.close()


__all__ = ["PostgresStore"]
