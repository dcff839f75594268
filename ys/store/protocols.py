"""What every store adapter offers: one client per part of the contract, and `Store`, the set
of them over one writer. The daemon, the dispatcher, recovery, the scheduler, `ys.testing`
and `ys doctor` are typed against these; only `ys/store/` knows how an adapter keeps them.

    ExecutionClient   admission, wakes, claims, leases, steps, outcomes, cancellation
    RetryClient       `ys retry`: a new execution replaying a terminal one's first steps
    StartClient       a child started once per (caller, step key)
    EffectClient      effect records begun, settled once, waited for
    ValueClient       durable values (`ys store`) and the executions waiting for them
    ScheduleClient    cron schedules and their fires
    ReadClient        records, lists, histories, descriptions (paged where they can be long)
    OverviewClient    the dashboard's bounded reads: what runs, is due, failed, waits
    Housekeeping      pruning, settings, recovery's queries and doctor's checks
    ObservingClient   metrics' counts, the all-executions event stream, script versions

Every write is atomic: it commits all of its rows and events, or nothing, and returns only
after its commit is durable. Times are epoch seconds; `now=None` means the store's clock. The
`_async` writes are the same writes for the daemon's event loop (awaited, not run in a
thread). The contract suite (tests/store/) runs every adapter against these.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Unpack

from ys.store.base import (
    DEFAULT_PAGE,
    LOG_TAIL_BYTES,
    Admission,
    AdmissionContext,
    AdmitOptions,
    Claimed,
    ConcurrencyLimit,
    Delivery,
    Description,
    Effect,
    EffectBegin,
    EffectConflict,
    EffectState,
    EffectWaiter,
    ExecutionLine,
    ExportLine,
    LogTail,
    Page,
    Parent,
    Retry,
    RunningExecution,
    RunState,
    Schedule,
    ScheduleAction,
    ScriptOptions,
    SharedCounts,
    StepRecord,
    StoredValue,
    Then,
    ValueEntry,
    ValueFound,
    ValueWaiter,
    ValueWritten,
)
from ys.store.eventdata import (
    AdmittedData,
    CancelledData,
    CancelRequestedData,
    ClaimedData,
    CompletedData,
    Ending,
    EventData,
    FailedData,
    ReleasedData,
    StepData,
    SuspendedData,
    UnknownData,
    WakeRequestedData,
)
from ys.store.reading import (
    ActivityBucket,
    ConcurrencyWait,
    DatabaseInfo,
    EffectWait,
    FailedAttempt,
    HistoryEvent,
    HourDurations,
    PastDelivery,
    PostgresReport,
    SlotHistory,
    SlotOutcome,
    StoreWait,
    StreamEvent,
    Wait,
)
from ys.store.records import STATUSES, TERMINAL, Event, Record
from ys.values import Outcome, OutcomeError, StepWrite

# What the rest of ys may name of the store: the clients, and the values they take and return.
__all__ = [
    "LOG_TAIL_BYTES",
    "STATUSES",
    "TERMINAL",
    "Admission",
    "AdmissionContext",
    "AdmitOptions",
    "Claimed",
    "ConcurrencyLimit",
    "ScriptOptions",
    "Delivery",
    "Description",
    "Effect",
    "EffectBegin",
    "EffectConflict",
    "EffectWaiter",
    "EffectClient",
    "EffectState",
    "Event",
    "AdmittedData",
    "CancelledData",
    "CancelRequestedData",
    "ClaimedData",
    "CompletedData",
    "Ending",
    "EventData",
    "FailedData",
    "ReleasedData",
    "StepData",
    "SuspendedData",
    "UnknownData",
    "WakeRequestedData",
    "ExecutionClient",
    "ExecutionLine",
    "ExportLine",
    "Health",
    "Housekeeping",
    "Outcome",
    "OutcomeError",
    "ObservingClient",
    "OverviewClient",
    "LogTail",
    "Page",
    "Parent",
    "ReadClient",
    "Record",
    "Retry",
    "RetryClient",
    "RunningExecution",
    "RunState",
    "Schedule",
    "ScheduleAction",
    "ScheduleClient",
    "SharedCounts",
    "StartClient",
    "StepRecord",
    "StepWrite",
    "Store",
    "StoredValue",
    "Then",
    "ValueClient",
    "ValueEntry",
    "ValueFound",
    "ValueWaiter",
    "ValueWritten",
    # the rows read for people to see (ys/store/reading.py)
    "ActivityBucket",
    "ConcurrencyWait",
    "DatabaseInfo",
    "EffectWait",
    "FailedAttempt",
    "HistoryEvent",
    "HourDurations",
    "PastDelivery",
    "PostgresReport",
    "SlotHistory",
    "SlotOutcome",
    "StoreWait",
    "StreamEvent",
    "Wait",
]


class ExecutionClient(Protocol):
    """The execution client: every write appends its events and updates the record in
    one transaction; the fenced ones (renew, release, acknowledge, save_step) refuse a token
    that no longer holds the lease (LEASE_LOST)."""

    def admit(self, workflow: str, params: Any = None, **given: Unpack[AdmitOptions]) -> Admission:
        """Admit one execution (record, `admitted` event, first wake, a row per tag) or, with
        if_exists="use-existing", find the identical one; EXECUTION_ID_CONFLICT otherwise.
        `due_at` later than the admission time makes the first wake that late (not claimable
        before it); earlier or None: due at once. The options: `AdmitOptions`."""
        ...

    async def admit_async(
        self,
        workflow: str,
        params: Any = None,
        *,
        lease_seconds: float | None = None,
        **given: Unpack[AdmitOptions],
    ) -> Admission:
        """`admit` for the event loop: committed with the other admissions of its batch.
        With `lease_seconds`, a new execution is also claimed in the admission's transaction
        (`Admission.delivery`: its first delivery, to run now; the caller checked that no
        concurrency limit applies to its workflow); never one due later (`due_at`)."""
        ...

    def request_wake(
        self,
        execution_id: str,
        at: float | None = None,
        *,
        now: float | None = None,
        reason: str = "requested",
    ) -> str:
        """Make the execution due at `at` (merged into an earlier pending wake): "requested",
        or "ignored" for a terminal one."""
        ...

    def wake_workflow(self, workflow: str, *, now: float | None = None) -> int:
        """Wake, in one transaction, every unleased admitted or suspended execution of
        `workflow` with no wake due yet (they waited for its script); returns how many."""
        ...

    def claim_due(
        self,
        now: float | None = None,
        limit: int = 10,
        lease_seconds: float | None = None,
    ) -> Claimed:
        """Release expired leases, then lease up to `limit` due executions, each with a new
        token and a `claimed` event, in one transaction. An execution of a workflow whose
        recorded script declares a concurrency limit (`set_script`) is leased only while
        fewer than its limit's `n` slots of its group are held (across daemons: counted in
        the claim's transaction); otherwise it stays due, marked waiting for a slot, until a
        slot of its group frees. `ended`: the executions the release of lost leases failed
        (their last attempt: `max_attempts`), for the caller to tell their waiters."""
        ...

    async def claim_due_async(
        self,
        now: float | None = None,
        limit: int = 10,
        lease_seconds: float | None = None,
    ) -> Claimed:
        """`claim_due` for the event loop (the dispatcher's)."""
        ...

    def release_expired(self, now: float | None = None) -> builtins.list[str]:
        """Release every expired lease (its wakes pending again, a `released` event each,
        counted toward its workflow's recorded `max_attempts`: the last one fails it)."""
        ...

    def free_slot(self, execution_id: str) -> bool:
        """The worker of an execution that ended without it (cancelled at once, timed out) is
        gone: the concurrency slot it kept frees (else it frees at its lease's end)."""
        ...

    def step_deadline(
        self,
        execution_id: str,
        token: str,
        key: str,
        *,
        timeout: float,
        attempts: int,
        retry_delay: float | None = None,
        now: float | None = None,
        lease_seconds: float | None = None,
    ) -> float:
        """Renew the lease (fenced) and store with it the limit of this attempt of step `key`:
        if the lease is swept past that limit, its sweep records the attempt failed
        `StepTimeout` (or waiting `retry_delay` for its retry). The new lease's end."""
        ...

    def renew(
        self,
        execution_id: str,
        token: str,
        *,
        now: float | None = None,
        lease_seconds: float | None = None,
    ) -> float:
        """Extend a live lease; returns its new expiry. A heartbeat: no event."""
        ...

    async def renew_async(
        self,
        execution_id: str,
        token: str,
        *,
        now: float | None = None,
        lease_seconds: float | None = None,
    ) -> float:
        """`renew` for the event loop."""
        ...

    def release(
        self,
        execution_id: str,
        token: str,
        *,
        retry_at: float | None = None,
        reason: str = "retry",
        now: float | None = None,
        detail: str | None = None,
        max_attempts: int | None = None,
        on_failure: str | None = None,
    ) -> bool:
        """End a delivery without an outcome: the lease is dropped and the covered wakes are
        due again at retry_at, with a `released` event saying why. A `worker_failed` release
        that is the `max_attempts`-th one instead fails the execution (error name
        DeliveryAttemptsExhausted, admitting `on_failure`) in the same transaction: True."""
        ...

    def timed_out(
        self, now: float | None = None, limit: int = 100
    ) -> builtins.list[tuple[str, str]]:
        """(execution ID, workflow) of live executions past their deadline (admission time
        plus the workflow's timeout recorded by `set_script`), earliest first."""
        ...

    def time_out(
        self, execution_id: str, *, now: float | None = None, on_failure: str | None = None
    ) -> bool:
        """Fail the execution with TimeoutError if it is live and past its deadline, checked
        and written in one transaction that drops its lease (its worker is fenced), wakes a
        waiting caller and admits `on_failure`; False when it is not due."""
        ...

    def acknowledge(
        self,
        execution_id: str,
        token: str,
        outcome: Outcome,
        *,
        now: float | None = None,
        on_failure: str | None = None,
    ) -> Outcome:
        """Record the delivery's outcome and drop its lease; a terminal one also wakes a
        caller waiting on it, and a failure admits `on_failure` (`<ID>.on-failure`) in the
        same transaction. The first terminal outcome wins and is returned ever after."""
        ...

    async def acknowledge_async(
        self,
        execution_id: str,
        token: str,
        outcome: Outcome,
        *,
        now: float | None = None,
        on_failure: str | None = None,
    ) -> Outcome:
        """`acknowledge` for the event loop."""
        ...

    def acknowledge_then(
        self,
        then: Then,
        execution_id: str,
        token: str,
        outcome: Outcome,
        *,
        on_failure: str | None = None,
    ) -> None:
        """`acknowledge` answered by `then(result, error)` on the writer's thread once
        committed (a worker channel answers its worker from there); a malformed outcome is
        refused at once (raised)."""
        ...

    def cancel(self, execution_id: str, *, now: float | None = None, at_once: bool = False) -> bool:
        """Request cancellation of the execution and of its attached children that have not
        ended, in one transaction; False when nothing changed. `at_once` (`ys cancel
        --now`): the execution also ends `cancelled` in that transaction, its lease dropped
        (its worker is fenced; the daemon running it kills it)."""
        ...

    def save_step(
        self, execution_id: str, token: str, key: str, step: StepWrite, *, now: float | None = None
    ) -> bool:
        """Record a step (and its wake) under the delivery's lease; returns whether a
        cancellation has been requested."""
        ...

    async def save_step_async(
        self, execution_id: str, token: str, key: str, step: StepWrite, *, now: float | None = None
    ) -> bool:
        """`save_step` for the event loop."""
        ...

    def save_step_then(
        self, then: Then, execution_id: str, token: str, key: str, step: StepWrite
    ) -> None:
        """`save_step` answered by `then(cancel_requested, error)` on the writer's thread once
        committed; a malformed step is refused at once (raised)."""
        ...

    def suspend_then(
        self,
        then: Then,
        execution_id: str,
        token: str,
        key: str,
        step: StepWrite,
        *,
        warnings: tuple[str, ...] | None = None,
    ) -> None:
        """A waiting step's save (`step.status` is `waiting`) and the delivery's `suspended` outcome, in one transaction
        (both or neither), answered like `acknowledge_then`: the worker sends both at once
        and does not wait between them."""
        ...

    def delivery_state(
        self, execution_id: str, token: str, *, now: float | None = None
    ) -> tuple[Record, builtins.list[StepRecord]]:
        """The record and its saved steps, read together, for the lease's holder (any
        caller once the execution is terminal)."""
        ...


class RetryClient(Protocol):
    """`ys retry`: a new execution of a terminal one, replaying its steps before a point."""

    def retry(
        self,
        execution_id: str,
        *,
        new_id: str | None = None,
        from_step: str | None = None,
        params: Any = None,
        again: bool = True,
        now: float | None = None,
    ) -> Retry:
        """In one transaction: admit a new execution of the terminal `execution_id`'s workflow
        (its params unless `params`, its tags, `retry_of` set; ID `new_id` or the first free
        `<ID>.rN`) whose history starts with copies of the steps recorded before `from_step`
        (default: before the first that did not complete), with the start requests and
        effect beginnings those steps made, so their replay starts no child and performs no
        effect again. EXECUTION_NOT_TERMINAL for a live one; an unknown `from_step` is
        INVALID_ARGUMENT. The original's history is unchanged; its `retried_by` names its
        newest retry (later admitted, ties by the greater ID), in the same transaction. With
        `again=False` an original that already has a retry is not retried again: the answer
        names that retry, `started=False`."""
        ...


class StartClient(Protocol):
    """The start client: not fenced, idempotent by (caller, step key)."""

    def start(
        self,
        caller_id: str,
        step_key: str,
        workflow: str,
        params_json: str = "null",
        *,
        detached: bool = False,
        now: float | None = None,
    ) -> str:
        """Admit the child and record the request in one transaction, once; a repeat of the
        same request returns the same child, a different one is START_REQUEST_MISMATCH.
        `params_json` is the request's canonical params ("null" when omitted)."""
        ...


class EffectClient(Protocol):
    """The effect client: not fenced; effect records are never pruned."""

    def effect_begin(
        self,
        operation: str,
        effect_id: str,
        input: Any,
        execution_id: str,
        step_key: str,
        *,
        now: float | None = None,
    ) -> EffectState:
        """Create the effect record or read it: `new` or `pending`, or `settled` with its
        result (canonical JSON); a changed operation or input is EFFECT_REQUEST_MISMATCH."""
        ...

    def effect_settle(
        self, operation: str, effect_id: str, result_json: str, *, now: float | None = None
    ) -> EffectState:
        """Settle once and wake every waiter in the same transaction; a different later
        result is kept as a conflict report and the first one returned."""
        ...

    def effect_wait(
        self,
        effect_id: str,
        execution_id: str,
        step_key: str,
        wake_at: float,
        *,
        now: float | None = None,
    ) -> float:
        """Register a waiter and its wake together (at once if settled); a repeat while the
        first wake is ahead returns that wake's time."""
        ...

    def effect(self, effect_id: str) -> Effect | None:
        """One effect record with its conflicts, beginnings and waiters."""
        ...

    def effects(
        self, status: str | None = None, execution_id: str | None = None
    ) -> builtins.list[Effect]:
        """Effect records (pending, settled, or with a conflict), oldest first."""
        ...


class ValueClient(Protocol):
    """Durable values that workflows wait for: one version per commit per key."""

    def value_put(
        self,
        key: str,
        value: Any,
        expected_version: int | None = None,
        *,
        now: float | None = None,
    ) -> ValueWritten:
        """Commit a new version (compare-and-set with expected_version; 0: must not exist)
        and wake every execution waiting on the key, in one transaction."""
        ...

    def value_get(self, key: str) -> StoredValue | None:
        """The key's value, version and time, or None."""
        ...

    def value_list(self, prefix: str = "") -> builtins.list[ValueEntry]:
        """Keys starting with `prefix` (case-sensitive), in key order."""
        ...

    def value_delete(self, key: str, *, now: float | None = None) -> bool:
        """Hide the key (a commit: its version still grows); False if there was none."""
        ...

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
        """The value if newer than `seen`; otherwise register the waiter and its timeout wake,
        checked and registered in one transaction so no put slips between."""
        ...


class ScheduleClient(Protocol):
    """Cron schedules: a fire admits `<name>@<slot>` and moves the cursor in one transaction."""

    def workflow_pause(self, workflow: str, paused: bool, *, now: float | None = None) -> bool:
        """Pause (or resume) a workflow: no claim takes its executions while paused (they are
        still admitted and wait). Returns whether it was paused before."""
        ...

    def workflow_pauses(self) -> dict[str, float]:
        """The paused workflows, each with when it was paused."""
        ...

    def schedule_add(
        self,
        name: str,
        workflow: str,
        cron_expr: str,
        *,
        tz: str = "local",
        params: Any = None,
        catch_up: str = "once",
        overlap: str = "skip",
        max_late: float | None = None,
        jitter: float = 0.0,
        source: str = "cli",
        replace: bool = False,
        now: float | None = None,
        restart: bool = False,
    ) -> Schedule:
        """Add a schedule (or, with replace, update one keeping its cursor; with restart too,
        its cursor moves up to now, so the new rule's slots start then). An interval rule
        (ys.cron.every_rule) is anchored at the schedule's creation."""
        ...

    def schedules(self) -> builtins.list[Schedule]:
        """Every schedule, by name."""
        ...

    def schedule(self, name: str) -> Schedule:
        """One schedule; NOT_FOUND if there is none."""
        ...

    def schedule_remove(self, name: str, *, declared_too: bool = False) -> None:
        """Remove a schedule; one a script declares only with declared_too."""
        ...

    def schedule_pause(self, name: str, paused: bool, *, now: float | None = None) -> Schedule:
        """Pause or resume; resuming does not fire what passed while paused."""
        ...

    def schedule_tick(
        self,
        name: str,
        *,
        now: float | None = None,
        on_failure: str | None = None,
    ) -> builtins.list[ScheduleAction]:
        """Fire what is due for one schedule (its admissions and cursor in one transaction;
        a skipped slot admits `on_failure` in it too); returns what was done."""
        ...


class ReadClient(Protocol):
    """Reads: each sees one committed state; pages are ordered and resumable by token."""

    def get(self, execution_id: str) -> Record | None:
        """The execution's record, or None."""
        ...

    def list(
        self,
        *,
        statuses: builtins.list[str] | None = None,
        workflow: str | None = None,
        parent: str | None = None,
        limit: int = DEFAULT_PAGE,
        page_token: str | None = None,
        tags: dict[str, str] | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> Page[Record]:
        """Records, newest admitted first (ties by ID), one page; the filters combine: every
        tag given, admitted at or after `since` and before `until` (epoch seconds). A tag
        filter reads an index range in list order, however many executions there are."""
        ...

    def history(
        self, execution_id: str, limit: int = DEFAULT_PAGE, page_token: str | None = None
    ) -> Page[HistoryEvent]:
        """One page of the execution's events (`HistoryEvent`s), from the page token's event on."""
        ...

    def describe(self, execution_id: str) -> Description:
        """The record with its steps, children, deliveries and history size, read together."""
        ...

    def steps(self, execution_id: str) -> builtins.list[StepRecord]:
        """The execution's step records, in the order they were first saved."""
        ...

    def events(self, execution_id: str) -> builtins.list[Event]:
        """The execution's whole history."""
        ...

    def waits(self, execution_id: str) -> builtins.list[Wait]:
        """What the execution waits on: store keys (oldest registration first), effects, and
        a concurrency slot."""
        ...

    def next_due_at(self) -> float | None:
        """The earliest time anything becomes claimable (a due wake or a lease expiry); an
        execution waiting for a concurrency slot is not claimable."""
        ...

    def next_times(self) -> tuple[float | None, float | None]:
        """`next_due_at` and the earliest deadline of a live execution (its workflow's
        timeout), read together: the dispatcher's one look before it waits."""
        ...

    def slot_waits(self, execution_ids: builtins.list[str]) -> dict[str, str]:
        """Which of these executions are due but wait for a concurrency slot, each with its
        slot group (`base.slot_of`)."""
        ...

    def script_waits(self, execution_ids: builtins.list[str]) -> dict[str, str]:
        """Which of these executions wait for their workflow's script (a delivery found it
        broken or missing, and nothing happened since), each with why, as that release said."""
        ...


class OverviewClient(Protocol):
    """The dashboard's reads (`ys ui`, `ys top`): each one bounded, whatever the database's
    size."""

    def running(self, limit: int = 100) -> builtins.list[RunningExecution]:
        """Running executions, oldest admitted first, with when their delivery began."""
        ...

    def due(self, limit: int = 10) -> builtins.list[Record]:
        """Executions with a pending wake and no delivery, soonest first."""
        ...

    def failed_since(self, since: float, limit: int = 20) -> builtins.list[Record]:
        """Executions that failed at or after `since`, the latest first."""
        ...

    def count_status(self, status: str, limit: int = 100_000) -> int:
        """How many executions have `status`, counted up to `limit`."""
        ...

    def find(
        self,
        *,
        statuses: builtins.list[str] | None = None,
        workflow: str | None = None,
        id_prefix: str | None = None,
        since: float | None = None,
        limit: int = 50,
        page_token: str | None = None,
    ) -> Page[Record]:
        """Records newest admitted first, filtered (also by ID prefix and age), one page; the
        order and the page tokens of `list`."""
        ...

    def value_waiters(self, limit: int = 1000) -> builtins.list[ValueWaiter]:
        """Who waits on which durable value, by key."""
        ...

    def database(self) -> DatabaseInfo:
        """Where the data is, its size and its schema version."""
        ...

    def schedule_slots(
        self,
        name: str | None = None,
        *,
        since: float | None = None,
        outcomes: tuple[str, ...] | None = None,
        limit: int = 20,
    ) -> builtins.list[SlotOutcome]:
        """What recent schedule slots came to (fired, late, skipped, queued, missed)."""
        ...

    def activity(
        self, since: float, until: float, bucket: float, workflow: str | None = None
    ) -> builtins.list[ActivityBucket]:
        """Executions started (admitted), completed and failed in each bucket of `bucket`
        seconds from `since` to `until` (whole minutes, whole 10 minutes for one workflow,
        at most 1000 buckets; ValueError otherwise), oldest first; of one workflow, or of all. Read from rollups kept as
        executions change, never a scan."""
        ...

    def activity_by_workflow(
        self, since: float, until: float, bucket: float
    ) -> dict[str, builtins.list[ActivityBucket]]:
        """`activity` of each workflow that saw anything in the span (whole 10 minutes), in
        one read."""
        ...

    def delivery_durations(self, since: float, until: float) -> builtins.list[HourDurations]:
        """Deliveries that ended in each hour from `since` to `until` (whole hours, at most a
        week), oldest first, the quantiles in seconds
        (within 9%: log-scale buckets), None for an hour without deliveries."""
        ...

    def schedule_history(self, name: str, limit: int = 50) -> builtins.list[SlotHistory]:
        """A schedule's newest slots with what each came to and its execution's status,
        newest first (`SlotHistory`)."""
        ...


@dataclass(frozen=True)
class Health:
    """What `ys doctor` reports of a database: read in one snapshot, never written."""

    location: str
    files: builtins.list[Path] = field(default_factory=list)  # what holds the data on disk
    error: str | None = None  # the database could not be read at all
    integrity: builtins.list[str] = field(default_factory=list)  # problems; empty if intact
    schema_version: int = 0
    schema_expected: int = 0
    missing_tables: builtins.list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)  # by table
    mismatches: builtins.list[str] = field(default_factory=list)  # records != folded history
    executions: int = 0


class Housekeeping(Protocol):
    """Pruning and settings, and what recovery and `ys doctor` ask of the store."""

    def gc(
        self, older_than: float, *, dry_run: bool = False, now: float | None = None
    ) -> builtins.list[str]:
        """Prune terminal executions last changed more than `older_than` seconds ago, with
        what belongs only to them; returns their IDs. Effect records always stay."""
        ...

    def setting(self, key: str) -> str | None:
        """The daemon's setting `key`, or None."""
        ...

    def set_setting(self, key: str, value: str) -> None:
        """Store the daemon's setting `key`."""
        ...

    def moved_to(self) -> str | None:
        """Where `ys migrate` moved this database's data, or None: a daemon refuses to start
        on a database that says so (it would run the moved executions again)."""
        ...

    def mark_moved(self, target: str | None) -> None:
        """Record that the data was moved to `target` (shown as it is: no password in it);
        None: the data is here (a database migrated back to)."""
        ...

    def held_leases(self) -> builtins.list[tuple[str, str]]:
        """(execution ID, token) of every lease held, expired or not (recovery releases
        them)."""
        ...

    def release_held(self, now: float | None = None) -> builtins.list[str]:
        """Recovery at start, in one transaction: release every lease this daemon held
        (on a database of one daemon, every lease), each with a `released` event."""
        ...

    def lease_holders(self, execution_ids: builtins.list[str]) -> dict[str, str]:
        """Which daemon holds each of these executions' leases ("daemon ID, daemon pid N"),
        on a database many daemons share; empty where one daemon owns the database."""
        ...

    def due_counts(self, now: float) -> tuple[int, int]:
        """How many executions are due at `now`, and how many wait for a later wake."""
        ...

    def verify(self) -> builtins.list[str]:
        """Re-fold every history and compare it with the stored record: the mismatches."""
        ...

    def health(self) -> Health:
        """Integrity, schema, row counts and `verify`, in one read snapshot."""
        ...


class ObservingClient(Protocol):
    """What metrics, the event stream and script versions read and record."""

    def shared_counts(self, now: float | None = None) -> SharedCounts:
        """What every daemon on this database reports alike, read in one snapshot from counts
        kept in each write's transaction (never a scan)."""
        ...

    def event_stream(
        self,
        cursor: str | None = None,
        *,
        since: float | None = None,
        limit: int = 1000,
    ) -> tuple[builtins.list[StreamEvent], str]:
        """Events of every execution after `cursor`, in commit order, and the cursor after
        them; without a cursor, from `since` (epoch seconds), else from now."""
        ...

    def set_script(
        self,
        workflow: str,
        sha256: str,
        *,
        pin: bool = False,
        timeout: float | None = None,
        now: float | None = None,
        options: ScriptOptions | None = None,
    ) -> None:
        """Record the version of `workflow`'s script seen now: what admissions record and
        unpinned deliveries run (`pin`: every delivery runs its admission's version), its
        timeout (each later admission's deadline is its admission time plus it) and the
        `options` every daemon on the database applies: the concurrency limit claims count,
        the `max_attempts` a lost lease counts toward, the failure handler that failure admits."""
        ...

    def scripts_needed(self) -> set[str]:
        """Versions a live execution needs, and each workflow's current one."""
        ...

    def stale_scripts(self) -> dict[str, int]:
        """Per workflow: live executions admitted under an older version than the current."""
        ...

    def observe_commits(self, observer: Callable[[float, int], None] | None) -> None:
        """Call `observer(seconds, requests)` after each commit of the writer."""
        ...

    def keep_log_tail(
        self,
        execution_id: str,
        attempt: int,
        *,
        daemon_id: str,
        path: str,
        size: int,
        tail: bytes,
        now: float | None = None,
    ) -> None:
        """Keep the end of one delivery's log (at most LOG_TAIL_BYTES), with the daemon that
        ran it and where its whole log is on that box; a second call for the same delivery
        replaces the first. Nothing if the execution no longer exists."""
        ...

    def log_tails(self, execution_id: str, attempt: int | None = None) -> builtins.list[LogTail]:
        """The kept log ends of an execution's deliveries (of one `attempt`), in attempt order."""
        ...


class TransferClient(Protocol):
    """Every record as plain records, out and in (`ys export`, `ys import`, `ys migrate`; the
    format: ys/store/sql/transfer.py)."""

    def export_records(
        self,
        emit: Callable[[ExportLine], None],
        *,
        since: float | None = None,
        statuses: Sequence[str] = (),
        workflow: str | None = None,
    ) -> dict[str, int]:
        """Call `emit` with every record (scripts, values, effects, schedules, then
        executions), read in one snapshot; the filters narrow the executions (admitted at or
        after `since`, in `statuses`, of `workflow`). A leased execution comes out released
        when its lease ends, due. Returns the count per kind."""
        ...

    def import_records(
        self,
        records: Iterable[ExportLine],
        on_batch: Callable[[dict[str, dict[str, int]], builtins.list[tuple[str, str]]], None],
    ) -> None:
        """Write the records not there yet, a batch per transaction; after each, `on_batch`
        gets its counts per kind ({"imported", "skipped", "conflicts"}) and its conflicts
        (kind, name): records there with other contents (an execution: another history),
        left as they are."""
        ...

    def holds_executions(self) -> bool:
        """Whether the database holds any execution."""
        ...

    def record_counts(self) -> dict[str, int]:
        """How many records of each kind the database holds."""
        ...


class Store(
    ExecutionClient,
    RetryClient,
    StartClient,
    EffectClient,
    ValueClient,
    ScheduleClient,
    ReadClient,
    OverviewClient,
    Housekeeping,
    ObservingClient,
    TransferClient,
    Protocol,
):
    """A store: every client over one database and one writer."""

    # Whether other daemons write this database too (PostgreSQL): then what one box has on
    # its disk only (a delivery's log) is kept in the database as well.
    shared: bool
    # The time every lease, deadline, due time and schedule slot is compared with (epoch
    # seconds): this box's clock, or on PostgreSQL the server's (docs/design.md, "On PostgreSQL").
    clock: Callable[[], float]

    def watch(
        self, on_due: Callable[[], None], on_change: Callable[[str, str], None] | None = None
    ) -> None:
        """On a database other daemons write too: call `on_due` when something may have become
        due and `on_change(execution_id, status)` when an execution's history grew, with its
        status after the change (from another thread). Where this daemon is the only writer, nothing."""
        ...

    def database_up(self) -> bool:
        """Whether the database answers, as this store last found it: False while a shared
        database's server cannot be reached (never read: quick, for status and metrics)."""
        ...

    def close(self) -> None:
        """Finish the writes queued before now, then release the database."""
        ...
