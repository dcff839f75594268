"""The PostgreSQL schema, versioned: each migration runs in the transaction that records it,
under a transaction-scoped advisory lock, so two daemons starting at once on a new database
migrate it once (the second waits for the lock, then finds the version already there).

The tables mirror the SQLite schema (ys/store/schema.py) with PostgreSQL types: times are
epoch seconds in double precision (as the SQLite store keeps them, so both adapters compute
the same due times), counters bigint, flags boolean. Canonical JSON (params, context, event
data, step values, results) stays text: its exact bytes are the value's identity (a start
request or an admission with the same params is the same one), and jsonb would reorder keys
and drop duplicates. IDs, keys and names compare and sort by their bytes (COLLATE "C"), as
in SQLite, whatever the database's collation: pages list in the same order. The lease holder (`lease_holder`, `lease_pid`) says which daemon and
process leased an execution: recovery at start releases only its own.
"""

from __future__ import annotations

import time
from typing import Any

from ys.store.sql.migrations import due

# The key of the advisory lock migrations take (any constant: 'ys' 'schema' in ASCII).
MIGRATION_LOCK = 0x7973_7363_6865_6D61

MIGRATIONS: list[str] = [
    # 1: execution records (a projection of their events), events, steps
    """
    CREATE TABLE executions (
        execution_id     text COLLATE "C" PRIMARY KEY,
        workflow         text COLLATE "C" NOT NULL,
        params           text NOT NULL,
        context          text NOT NULL,
        status           text NOT NULL,
        outcome          text,
        admitted_at      double precision NOT NULL,
        updated_at       double precision NOT NULL,
        due_at           double precision,
        covered_due_at   double precision,
        prior_status     text,
        attempts         bigint NOT NULL,
        parent_id        text COLLATE "C",
        parent_step      text,
        parent_detached  boolean,
        cancel_requested boolean NOT NULL DEFAULT false,
        history_length   bigint NOT NULL,
        history_bytes    bigint NOT NULL,
        lease_token      text,
        lease_expires_at double precision,
        lease_holder     text,
        lease_pid        bigint
    );
    CREATE INDEX executions_due ON executions (due_at, execution_id) WHERE due_at IS NOT NULL;
    CREATE INDEX executions_lease ON executions (lease_expires_at)
        WHERE lease_token IS NOT NULL;
    CREATE INDEX executions_holder ON executions (lease_holder) WHERE lease_token IS NOT NULL;
    CREATE INDEX executions_admitted ON executions (admitted_at, execution_id);
    CREATE INDEX executions_status ON executions (status, admitted_at);
    CREATE INDEX executions_parent ON executions (parent_id) WHERE parent_id IS NOT NULL;
    CREATE INDEX executions_workflow ON executions (workflow, status);
    CREATE TABLE events (
        execution_id text COLLATE "C" NOT NULL,
        seq          bigint NOT NULL,
        at           double precision NOT NULL,
        kind         text NOT NULL,
        data         text NOT NULL,
        PRIMARY KEY (execution_id, seq)
    );
    CREATE TABLE steps (
        execution_id text COLLATE "C" NOT NULL,
        key          text COLLATE "C" NOT NULL,
        kind         text NOT NULL,
        status       text NOT NULL,
        value        text,
        attempts     bigint NOT NULL DEFAULT 1,
        wake_at      double precision,
        updated_at   double precision NOT NULL,
        first_seq    bigint NOT NULL,
        PRIMARY KEY (execution_id, key)
    );
    """,
    # 2: start requests: one target per (caller execution, step key)
    """
    CREATE TABLE start_requests (
        caller_id  text COLLATE "C" NOT NULL,
        step_key   text COLLATE "C" NOT NULL,
        workflow   text COLLATE "C" NOT NULL,
        params     text NOT NULL,
        detached   boolean NOT NULL,
        target_id  text COLLATE "C" NOT NULL,
        created_at double precision NOT NULL,
        PRIMARY KEY (caller_id, step_key)
    );
    """,
    # 3: the effect ledger: never pruned with an execution
    """
    CREATE TABLE effects (
        effect_id  text COLLATE "C" PRIMARY KEY,
        operation  text NOT NULL,
        input      text NOT NULL,
        status     text NOT NULL,
        result     text,
        created_at double precision NOT NULL,
        settled_at double precision
    );
    CREATE INDEX effects_status ON effects (status);
    CREATE TABLE effect_begins (
        effect_id    text COLLATE "C" NOT NULL,
        execution_id text COLLATE "C" NOT NULL,
        step_key     text COLLATE "C" NOT NULL,
        at           double precision NOT NULL,
        PRIMARY KEY (effect_id, execution_id, step_key)
    );
    CREATE TABLE effect_waiters (
        effect_id     text COLLATE "C" NOT NULL,
        execution_id  text COLLATE "C" NOT NULL,
        step_key      text COLLATE "C" NOT NULL,
        wake_at       double precision NOT NULL,
        registered_at double precision NOT NULL,
        PRIMARY KEY (effect_id, execution_id, step_key)
    );
    CREATE INDEX effect_waiters_execution ON effect_waiters (execution_id);
    CREATE TABLE effect_conflicts (
        id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        effect_id          text COLLATE "C" NOT NULL,
        result             text NOT NULL,
        conflicting_result text NOT NULL,
        at                 double precision NOT NULL
    );
    CREATE INDEX effect_conflicts_effect ON effect_conflicts (effect_id);
    """,
    # 4: durable values that workflows wait for (approvals, signals), and their waiters
    """
    CREATE TABLE kv (
        key        text COLLATE "C" PRIMARY KEY,
        value      text,
        version    bigint NOT NULL,
        deleted    boolean NOT NULL DEFAULT false,
        updated_at double precision NOT NULL
    );
    CREATE TABLE kv_waiters (
        key           text COLLATE "C" NOT NULL,
        execution_id  text COLLATE "C" NOT NULL,
        step_key      text COLLATE "C" NOT NULL,
        seen_version  bigint NOT NULL,
        registered_at double precision NOT NULL,
        PRIMARY KEY (key, execution_id, step_key)
    );
    CREATE INDEX kv_waiters_execution ON kv_waiters (execution_id);
    """,
    # 5: cron schedules (each fire's execution ID derives from the schedule and the slot, so
    # daemons firing one slot at once collapse into one execution), and the daemon settings
    """
    CREATE TABLE schedules (
        name              text COLLATE "C" PRIMARY KEY,
        workflow          text COLLATE "C" NOT NULL,
        cron              text NOT NULL,
        tz                text NOT NULL,
        params            text NOT NULL,
        catch_up          text NOT NULL,
        max_late          double precision,
        overlap           text NOT NULL,
        jitter            double precision NOT NULL DEFAULT 0,
        paused            boolean NOT NULL DEFAULT false,
        source            text NOT NULL,
        cursor            double precision NOT NULL,
        next_fire_at      double precision,
        last_fire_at      double precision,
        last_slot         double precision,
        last_execution_id text COLLATE "C",
        queued_slot       double precision,
        created_at        double precision NOT NULL
    );
    CREATE TABLE settings (key text PRIMARY KEY, value text NOT NULL);
    """,
    # 6: tell other daemons at once. A row that becomes due (or gets a new wake time) sends
    # one notification on channel ys_due (their dispatchers claim); a row whose history
    # grows sends its execution ID on ys_changed (their `ys wait` and `--follow` long polls
    # answer). PostgreSQL sends notifications at COMMIT, never for a write that rolls back,
    # and folds a transaction's identical ones into one: a group commit of many admissions
    # wakes each dispatcher once.
    """
    CREATE FUNCTION ys_notify_due() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('ys_due', '');
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER executions_due_notify
        AFTER INSERT OR UPDATE OF due_at ON executions
        FOR EACH ROW WHEN (NEW.due_at IS NOT NULL)
        EXECUTE FUNCTION ys_notify_due();
    CREATE FUNCTION ys_notify_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('ys_changed', NEW.execution_id);
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER executions_changed_notify
        AFTER UPDATE OF history_length ON executions
        FOR EACH ROW WHEN (NEW.history_length IS DISTINCT FROM OLD.history_length)
        EXECUTE FUNCTION ys_notify_changed();
    """,
    # 7: what main's SQLite migrations 7 to 11 added, in one step.
    # - The dashboard's reads: recent failures by when they failed (partial index), what each
    #   schedule slot came to (ys/store/sql/slots.py), executions of one workflow newest
    #   first.
    # - Counts the metrics read without a scan, kept by triggers in the transaction of every
    #   write whichever path writes (admissions, events, gc): executions by workflow and
    #   status, effects by status. ON CONFLICT DO UPDATE is atomic at READ COMMITTED.
    # - The event log: every event's position in commit order (`ys history --follow --all`).
    #   A sequence value is drawn before commit, so two transactions could commit in the
    #   other order than their positions and a reader past the later one would skip the
    #   earlier for good. The trigger therefore takes one advisory lock (EVENT_LOG_LOCK),
    #   held to commit, before drawing a position: appends are serialised, and a position is
    #   visible before the next one is drawn (a transaction is visible before its locks go).
    #   The writer takes the same lock first in each transaction (writer.py), so a
    #   transaction never waits for it while holding row locks another writer needs.
    # - Script versions: each admission records its workflow's current version (`scripts`),
    #   each claim the version its delivery runs.
    """
    CREATE INDEX executions_failed ON executions (updated_at) WHERE status = 'failed';
    CREATE INDEX executions_workflow_admitted ON executions (workflow, admitted_at, execution_id);
    CREATE TABLE schedule_slots (
        name         text COLLATE "C" NOT NULL,
        slot         double precision NOT NULL,
        outcome      text NOT NULL,
        why          text,
        execution_id text COLLATE "C",
        at           double precision NOT NULL,
        count        bigint NOT NULL DEFAULT 1,
        PRIMARY KEY (name, slot, outcome)
    );
    CREATE INDEX schedule_slots_at ON schedule_slots (at);

    CREATE TABLE execution_counts (
        workflow text COLLATE "C" NOT NULL,
        status   text NOT NULL,
        n        bigint NOT NULL,
        PRIMARY KEY (workflow, status)
    );
    INSERT INTO execution_counts (workflow, status, n)
        SELECT workflow, status, COUNT(*) FROM executions GROUP BY workflow, status;
    CREATE FUNCTION ys_execution_counts() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE execution_counts SET n = n - 1
                WHERE workflow = OLD.workflow AND status = OLD.status;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO execution_counts AS x (workflow, status, n)
                VALUES (NEW.workflow, NEW.status, 1)
                ON CONFLICT (workflow, status) DO UPDATE SET n = x.n + 1;
        END IF;
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER execution_counts_insert AFTER INSERT OR DELETE ON executions
        FOR EACH ROW EXECUTE FUNCTION ys_execution_counts();
    CREATE TRIGGER execution_counts_update AFTER UPDATE OF status ON executions
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
        EXECUTE FUNCTION ys_execution_counts();
    CREATE TABLE effect_counts (status text PRIMARY KEY, n bigint NOT NULL);
    INSERT INTO effect_counts (status, n) SELECT status, COUNT(*) FROM effects GROUP BY status;
    CREATE FUNCTION ys_effect_counts() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE effect_counts SET n = n - 1 WHERE status = OLD.status;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO effect_counts AS x (status, n) VALUES (NEW.status, 1)
                ON CONFLICT (status) DO UPDATE SET n = x.n + 1;
        END IF;
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER effect_counts_insert AFTER INSERT OR DELETE ON effects
        FOR EACH ROW EXECUTE FUNCTION ys_effect_counts();
    CREATE TRIGGER effect_counts_update AFTER UPDATE OF status ON effects
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
        EXECUTE FUNCTION ys_effect_counts();

    CREATE TABLE event_log (
        pos          bigserial PRIMARY KEY,
        execution_id text COLLATE "C" NOT NULL,
        seq          bigint NOT NULL,
        at           double precision NOT NULL
    );
    INSERT INTO event_log (execution_id, seq, at)
        SELECT execution_id, seq, at FROM events ORDER BY at, execution_id, seq;
    CREATE FUNCTION ys_event_log() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_advisory_xact_lock(8751450060210792295);
        INSERT INTO event_log (execution_id, seq, at) VALUES (NEW.execution_id, NEW.seq, NEW.at);
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER event_log_insert AFTER INSERT ON events
        FOR EACH ROW EXECUTE FUNCTION ys_event_log();

    ALTER TABLE executions ADD COLUMN script_sha256 text;
    CREATE TABLE scripts (
        workflow   text COLLATE "C" PRIMARY KEY,
        sha256     text NOT NULL,
        pin        boolean NOT NULL DEFAULT false,
        updated_at double precision NOT NULL
    );
    """,
    # 8: tags and retries, as SQLite's migration 12: the record's tags (JSON, NULL
    # for none) and the execution it retries; one row per tag in list order; children listed
    # through their parent's range of an index.
    """
    ALTER TABLE executions ADD COLUMN tags text, ADD COLUMN retry_of text COLLATE "C";
    CREATE TABLE execution_tags (
        key          text COLLATE "C" NOT NULL,
        value        text COLLATE "C" NOT NULL,
        admitted_at  double precision NOT NULL,
        execution_id text COLLATE "C" NOT NULL,
        PRIMARY KEY (key, value, admitted_at, execution_id)
    );
    CREATE INDEX execution_tags_execution ON execution_tags (execution_id);
    DROP INDEX executions_parent;
    CREATE INDEX executions_parent ON executions (parent_id, admitted_at, execution_id)
        WHERE parent_id IS NOT NULL;
    """,
    # 9: the end of each delivery's log, as SQLite's migration 13: daemons share
    # this database, so `ys logs` on any box shows what a delivery on another box printed.
    """
    CREATE TABLE delivery_logs (
        execution_id text COLLATE "C" NOT NULL,
        attempt      integer NOT NULL,
        daemon_id    text NOT NULL,
        path         text NOT NULL,
        size         bigint NOT NULL,
        tail         bytea NOT NULL,
        ended_at     double precision NOT NULL,
        PRIMARY KEY (execution_id, attempt)
    );
    """,
    # 10: as SQLite's migration 14: each status's range in list order, ties included, so
    # `ys ps` merges the live statuses' first pages (O(page), however many are live).
    """
    DROP INDEX executions_status;
    CREATE INDEX executions_status ON executions (status, admitted_at DESC, execution_id);
    """,
    # 11: hard timeouts, as SQLite's migration 15: `scripts.timeout`, and each
    # admission's `deadline_at` (admission time + its workflow's timeout), set by a BEFORE
    # INSERT trigger in the admission's own statement whichever path admits (trigger, child
    # start, schedule, failure handler, retry); cleared when the execution ends.
    """
    ALTER TABLE scripts ADD COLUMN timeout double precision;
    ALTER TABLE executions ADD COLUMN deadline_at double precision;
    CREATE INDEX executions_deadline ON executions (deadline_at) WHERE deadline_at IS NOT NULL;
    CREATE FUNCTION ys_deadline_set() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.deadline_at := NEW.admitted_at
            + (SELECT timeout FROM scripts WHERE workflow = NEW.workflow);
        RETURN NEW;
    END
    $$;
    CREATE TRIGGER executions_deadline_set BEFORE INSERT ON executions
        FOR EACH ROW EXECUTE FUNCTION ys_deadline_set();
    """,
    # 12: concurrency limits (ys/store/sql/concurrency.py; the lock: ys/store/postgres/dialect.py), as SQLite's migration 16:
    # `slot`, the slot group a leased row's lease holds; `slot_wait`, the group a due
    # execution waits in for a free slot (claims pass it over; the due index leaves it out).
    # A waiter made claimable again tells the other daemons, as a row that becomes due does.
    """
    ALTER TABLE executions ADD COLUMN slot text COLLATE "C";
    ALTER TABLE executions ADD COLUMN slot_wait text COLLATE "C";
    CREATE INDEX executions_slot ON executions (workflow, slot)
        WHERE slot IS NOT NULL AND lease_token IS NOT NULL;
    CREATE INDEX executions_slot_wait ON executions (workflow, slot_wait, due_at, execution_id)
        WHERE slot_wait IS NOT NULL;
    DROP INDEX executions_due;
    CREATE INDEX executions_due ON executions (due_at, execution_id)
        WHERE due_at IS NOT NULL AND slot_wait IS NULL;
    CREATE TRIGGER executions_slot_notify
        AFTER UPDATE OF slot_wait ON executions
        FOR EACH ROW WHEN (NEW.slot_wait IS NULL AND OLD.slot_wait IS NOT NULL)
        EXECUTE FUNCTION ys_notify_due();
    """,
    # 13: retries linked both ways, as SQLite's migration 17: `retried_by`, the newest retry
    # (later admitted, ties by the greater ID), set in each retry's transaction and filled
    # here from the retries already made; an execution's retries read off an index.
    """
    ALTER TABLE executions ADD COLUMN retried_by text COLLATE "C";
    CREATE INDEX executions_retry_of ON executions (retry_of, admitted_at, execution_id)
        WHERE retry_of IS NOT NULL;
    UPDATE executions o SET retried_by = (
        SELECT r.execution_id FROM executions r WHERE r.retry_of = o.execution_id
        ORDER BY r.admitted_at DESC, r.execution_id DESC LIMIT 1
    ) WHERE o.execution_id IN (SELECT retry_of FROM executions WHERE retry_of IS NOT NULL);
    """,
    # 14: workflow pauses, as SQLite's migration 18 (ys/store/sql/pauses.py). A resume makes
    # the workflow's waiting executions due again: it tells the other daemons' dispatchers
    # (ys_due, as a row that becomes due does) rather than leaving them to their next look.
    """
    CREATE TABLE workflow_pauses (workflow text COLLATE "C" PRIMARY KEY,
        paused_at double precision NOT NULL);
    CREATE TRIGGER workflow_pauses_resume_notify AFTER DELETE ON workflow_pauses
        FOR EACH ROW EXECUTE FUNCTION ys_notify_due();
    """,
    # 15, as SQLite's 19:
    # the dashboard's pictures (ys/store/sql/charts.py): `activity` per minute and
    # `workflow_activity` per workflow and 10 minutes, kept by triggers and backfilled for
    # the last two days, and `delivery_durations` per hour, kept by the core.
    """
    CREATE TABLE activity (
        minute    bigint PRIMARY KEY,
        started   bigint NOT NULL DEFAULT 0,
        completed bigint NOT NULL DEFAULT 0,
        failed    bigint NOT NULL DEFAULT 0
    );
    CREATE TABLE workflow_activity (
        minute    bigint NOT NULL,
        workflow  text COLLATE "C" NOT NULL,
        started   bigint NOT NULL DEFAULT 0,
        completed bigint NOT NULL DEFAULT 0,
        failed    bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (minute, workflow)
    );
    INSERT INTO workflow_activity (minute, workflow, started)
        SELECT floor(admitted_at / 600)::bigint * 10, workflow, COUNT(*) FROM executions
        WHERE admitted_at >= extract(epoch FROM now()) - 172800 GROUP BY 1, 2;
    INSERT INTO workflow_activity (minute, workflow, completed, failed)
        SELECT floor(updated_at / 600)::bigint * 10, workflow,
            COUNT(*) FILTER (WHERE status = 'completed'),
            COUNT(*) FILTER (WHERE status = 'failed') FROM executions
        WHERE status IN ('completed', 'failed')
            AND updated_at >= extract(epoch FROM now()) - 172800 GROUP BY 1, 2
        ON CONFLICT (minute, workflow) DO UPDATE SET
            completed = excluded.completed, failed = excluded.failed;
    INSERT INTO activity (minute, started)
        SELECT floor(admitted_at / 60)::bigint, COUNT(*) FROM executions
        WHERE admitted_at >= extract(epoch FROM now()) - 172800 GROUP BY 1;
    INSERT INTO activity (minute, completed, failed)
        SELECT floor(updated_at / 60)::bigint, COUNT(*) FILTER (WHERE status = 'completed'),
            COUNT(*) FILTER (WHERE status = 'failed') FROM executions
        WHERE status IN ('completed', 'failed')
            AND updated_at >= extract(epoch FROM now()) - 172800 GROUP BY 1
        ON CONFLICT (minute) DO UPDATE SET
            completed = excluded.completed, failed = excluded.failed;
    CREATE FUNCTION ys_activity() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        done int := (NEW.status = 'completed')::int;
        bad int := (NEW.status = 'failed')::int;
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO activity AS a (minute, started)
                VALUES (floor(NEW.admitted_at / 60)::bigint, 1)
                ON CONFLICT (minute) DO UPDATE SET started = a.started + 1;
            INSERT INTO workflow_activity AS a (minute, workflow, started)
                VALUES (floor(NEW.admitted_at / 600)::bigint * 10, NEW.workflow, 1)
                ON CONFLICT (minute, workflow) DO UPDATE SET started = a.started + 1;
        END IF;
        IF NEW.status IN ('completed', 'failed') THEN
            INSERT INTO activity AS a (minute, completed, failed)
                VALUES (floor(NEW.updated_at / 60)::bigint, done, bad)
                ON CONFLICT (minute) DO UPDATE SET
                    completed = a.completed + done, failed = a.failed + bad;
            INSERT INTO workflow_activity AS a (minute, workflow, completed, failed)
                VALUES (floor(NEW.updated_at / 600)::bigint * 10, NEW.workflow, done, bad)
                ON CONFLICT (minute, workflow) DO UPDATE SET
                    completed = a.completed + done, failed = a.failed + bad;
        END IF;
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER activity_insert AFTER INSERT ON executions
        FOR EACH ROW EXECUTE FUNCTION ys_activity();
    CREATE TRIGGER activity_ended AFTER UPDATE OF status ON executions
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
        EXECUTE FUNCTION ys_activity();
    CREATE TABLE delivery_durations (
        hour   bigint NOT NULL,
        bucket integer NOT NULL,
        n      bigint NOT NULL,
        PRIMARY KEY (hour, bucket)
    );
    """,
    # 16, as SQLite's 20: limits and attempts that hold across daemons (the workflow's
    # concurrency, key, max_attempts and failure handler with its current script; a slot held
    # past its execution's end until its worker is gone or its lease's end; the running step
    # attempt's deadline with the lease).
    """
    ALTER TABLE scripts ADD COLUMN concurrency bigint;
    ALTER TABLE scripts ADD COLUMN concurrency_key text COLLATE "C";
    ALTER TABLE scripts ADD COLUMN max_attempts bigint;
    ALTER TABLE scripts ADD COLUMN on_failure text COLLATE "C";
    ALTER TABLE executions ADD COLUMN slot_held_until double precision;
    ALTER TABLE executions ADD COLUMN step_deadline_at double precision;
    ALTER TABLE executions ADD COLUMN step_deadline text;
    CREATE INDEX executions_slot_held ON executions (workflow, slot)
        WHERE slot_held_until IS NOT NULL;
    """,
    # 17: ys_changed says the execution's status with its ID ("<status> <execution_id>"), so
    # another daemon's `ys wait` reads the record again only when it may have ended, not at
    # each step (docs/design.md, "On PostgreSQL"). PostgreSQL only: a SQLite file has one
    # daemon, which hears nothing.
    """
    CREATE OR REPLACE FUNCTION ys_notify_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('ys_changed', NEW.status || ' ' || NEW.execution_id);
        RETURN NULL;
    END
    $$;
    """,
    # 18, as SQLite's 21: recent failures by `failed_at` (a failed execution's `updated_at`,
    # NULL for any other status; computed by the server), not by an index on `updated_at`
    # itself: an indexed column that a write changes makes PostgreSQL write a new entry in
    # every index of the row, while one that changes no indexed column is a heap-only (HOT)
    # update. A step's save changes `updated_at` and no indexed column now: HOT, a third less
    # WAL per step (docs/design.md, "On PostgreSQL").
    """
    ALTER TABLE executions ADD COLUMN failed_at double precision
        GENERATED ALWAYS AS (CASE WHEN status = 'failed' THEN updated_at END) STORED;
    DROP INDEX executions_failed;
    CREATE INDEX executions_failed ON executions (failed_at) WHERE failed_at IS NOT NULL;
    """,
]

# The advisory lock that orders the event log (migration 7's trigger names it as a literal:
# 'ys' 'evlog' in ASCII).
EVENT_LOG_LOCK = 0x7973_6576_6C6F_6767

TABLES = (
    "executions",
    "events",
    "steps",
    "start_requests",
    "effects",
    "effect_begins",
    "effect_waiters",
    "effect_conflicts",
    "kv",
    "kv_waiters",
    "schedules",
    "settings",
    "schedule_slots",
    "execution_counts",
    "effect_counts",
    "event_log",
    "scripts",
    "execution_tags",
    "delivery_logs",
    "workflow_pauses",
    "activity",
    "workflow_activity",
    "delivery_durations",
)


def migrate(conn: Any) -> int:
    """Bring the database to the newest schema; returns the version it is at. `conn` is a
    psycopg connection in autocommit mode; each migration is one transaction."""
    while True:
        with conn.transaction():
            # Held until this transaction ends: a second daemon waits here, then sees the
            # version the first one recorded (READ COMMITTED: each statement sees the
            # commits made before it started, the lock's holder's included).
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version bigint PRIMARY KEY, applied_at double precision NOT NULL)"
            )
            version = int(
                conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[
                    0
                ]
            )
            if not due(version, len(MIGRATIONS)):
                return version
            conn.execute(MIGRATIONS[version])  # no parameters: several statements at once
            conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (%s, %s)",
                (version + 1, time.time()),
            )


def version(conn: Any) -> int:
    """The schema version recorded in the database (0 when it was never migrated)."""
    row = conn.execute("SELECT to_regclass('schema_migrations')").fetchone()
    if row[0] is None:
        return 0
    return int(
        conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
    )
