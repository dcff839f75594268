"""The rows the store reads for people to see (the dashboard, `ys top`, `GET /v1/overview`):
what schedule slots came to, the charts' buckets, what an execution waits on, who waits on a
durable value, where the database is. Each a frozen dataclass; the JSON a reply carries is
built from them at the edge (ys/daemon/views.py; docs/design.md, "Wire formats")."""

from __future__ import annotations

from dataclasses import dataclass

from ys.store.records import Event
from ys.values import UserJson


@dataclass(frozen=True)
class SlotOutcome:
    """What one schedule slot came to: fired, late (a catch-up), skipped, queued, or missed
    (`count` slots at once, the newest `slot`)."""

    name: str
    slot: float
    outcome: str
    why: str | None  # None for a slot that fired on time
    execution_id: str | None
    at: float  # when the tick accounted for it
    count: int


@dataclass(frozen=True)
class SlotHistory:
    """A schedule's slot beside its execution: `mark` is the outcome, or "failed" when it
    fired and its execution failed; `lateness` the seconds from the slot to the admission."""

    slot: float
    outcome: str
    mark: str
    why: str | None  # None for a slot that fired on time
    execution_id: str | None
    status: str | None  # the execution's, None when it is gone or none was admitted
    at: float
    count: int
    lateness: float | None


@dataclass(frozen=True)
class ActivityBucket:
    """Executions started (admitted), completed and failed in the bucket from `start`."""

    start: float
    started: int = 0
    completed: int = 0
    failed: int = 0


@dataclass(frozen=True)
class HourDurations:
    """Deliveries that ended in the hour from `start`, with their p50 and p95 in seconds
    (None for an hour without deliveries)."""

    start: float
    count: int
    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class StoreWait:
    """An execution waits for a durable value under `key` (its step `step_key`)."""

    key: str
    step_key: str
    since: float
    kind: str = "store"


@dataclass(frozen=True)
class EffectWait:
    """An execution waits for another's effect to settle (or until `wake_at`)."""

    effect_id: str
    step_key: str
    wake_at: float
    kind: str = "effect"


@dataclass(frozen=True)
class ConcurrencyWait:
    """A due execution waits for a slot of its workflow's concurrency limit."""

    workflow: str
    slot: str
    kind: str = "concurrency"


Wait = StoreWait | EffectWait | ConcurrencyWait


@dataclass(frozen=True)
class PastDelivery:
    """One claim of an execution as its history tells it: when it began, when and how it
    ended (`outcome`: suspended, completed, failed, cancelled, or "retry (<reason>)"; None
    while it runs), what it said when released (`detail`) and what it warned of."""

    attempt: int | None
    started_at: float
    ended_at: float | None = None
    outcome: str | None = None
    script_sha256: str | None = None  # the script version it ran
    detail: str | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class FailedAttempt:
    """A step's attempt that failed, from its step event: `error` as the step saved it, shown
    as is."""

    attempt: int
    at: float
    error: UserJson


@dataclass(frozen=True)
class HistoryEvent:
    """An event of one execution's history (a `history` page's item): `seq` its place, from 1."""

    seq: int
    event: Event


@dataclass(frozen=True)
class StreamEvent:
    """One event of the stream of every execution's events (`event_stream`), in commit
    order: `pos` is its position, the cursor just after it; `seq` its place in its history."""

    pos: int
    execution_id: str
    workflow: str
    seq: int
    event: Event


@dataclass(frozen=True)
class DatabaseInfo:
    """Where the data is (a file, or a URL without its password), its size in bytes and its
    schema version."""

    path: str
    bytes: int
    schema_version: int


@dataclass(frozen=True)
class PostgresReport:
    """What `ys doctor` reads of a PostgreSQL database without writing: the server's and the
    schema's versions and, on a database of this schema, its row counts, the records that
    differ from their history, and where `ys migrate` moved its data (None: it did not)."""

    server_version: str
    schema_version: int
    latest_version: int
    rows: dict[str, int]  # table -> rows; empty before the schema is this version's
    mismatches: list[str] | None  # None: not verified (the schema is not this version's)
    moved_to: str | None = None
