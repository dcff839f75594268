"""The schema, versioned: each migration runs in the transaction that records it."""

from __future__ import annotations

import sqlite3
import time

from ys.store.sql.migrations import due
from ys.store.sqlite.db import transaction

MIGRATIONS: list[str] = [
    # 1: execution records (a projection of their events), events, steps
    """
    CREATE TABLE executions (
        execution_id     TEXT PRIMARY KEY,
        workflow         TEXT NOT NULL,
        params           TEXT NOT NULL,
        context          TEXT NOT NULL,
        status           TEXT NOT NULL,
        outcome          TEXT,
        admitted_at      REAL NOT NULL,
        updated_at       REAL NOT NULL,
        due_at           REAL,
        covered_due_at   REAL,
        prior_status     TEXT,
        attempts         INTEGER NOT NULL,
        parent_id        TEXT,
        parent_step      TEXT,
        parent_detached  INTEGER,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        history_length   INTEGER NOT NULL,
        history_bytes    INTEGER NOT NULL,
        lease_token      TEXT,
        lease_expires_at REAL
    );
    CREATE INDEX executions_due ON executions(due_at) WHERE due_at IS NOT NULL;
    CREATE INDEX executions_lease ON executions(lease_expires_at) WHERE lease_token IS NOT NULL;
    CREATE INDEX executions_admitted ON executions(admitted_at DESC, execution_id);
    CREATE INDEX executions_status ON executions(status, admitted_at DESC);
    CREATE INDEX executions_parent ON executions(parent_id) WHERE parent_id IS NOT NULL;
    CREATE TABLE events (
        execution_id TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        at           REAL NOT NULL,
        kind         TEXT NOT NULL,
        data         TEXT NOT NULL,
        PRIMARY KEY (execution_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE steps (
        execution_id TEXT NOT NULL,
        key          TEXT NOT NULL,
        kind         TEXT NOT NULL,
        status       TEXT NOT NULL,
        value        TEXT,
        attempts     INTEGER NOT NULL DEFAULT 1,
        wake_at      REAL,
        updated_at   REAL NOT NULL,
        first_seq    INTEGER NOT NULL,
        PRIMARY KEY (execution_id, key)
    ) WITHOUT ROWID;
    """,
    # 2: start requests: one target per (caller execution, step key)
    """
    CREATE TABLE start_requests (
        caller_id  TEXT NOT NULL,
        step_key   TEXT NOT NULL,
        workflow   TEXT NOT NULL,
        params     TEXT NOT NULL,
        detached   INTEGER NOT NULL,
        target_id  TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (caller_id, step_key)
    ) WITHOUT ROWID;
    """,
    # 3: the effect ledger: never pruned with an execution
    """
    CREATE TABLE effects (
        effect_id  TEXT PRIMARY KEY,
        operation  TEXT NOT NULL,
        input      TEXT NOT NULL,
        status     TEXT NOT NULL,
        result     TEXT,
        created_at REAL NOT NULL,
        settled_at REAL
    ) WITHOUT ROWID;
    CREATE INDEX effects_status ON effects(status);
    CREATE TABLE effect_begins (
        effect_id    TEXT NOT NULL,
        execution_id TEXT NOT NULL,
        step_key     TEXT NOT NULL,
        at           REAL NOT NULL,
        PRIMARY KEY (effect_id, execution_id, step_key)
    ) WITHOUT ROWID;
    CREATE TABLE effect_waiters (
        effect_id     TEXT NOT NULL,
        execution_id  TEXT NOT NULL,
        step_key      TEXT NOT NULL,
        wake_at       REAL NOT NULL,
        registered_at REAL NOT NULL,
        PRIMARY KEY (effect_id, execution_id, step_key)
    ) WITHOUT ROWID;
    CREATE INDEX effect_waiters_execution ON effect_waiters(execution_id);
    CREATE TABLE effect_conflicts (
        id                 INTEGER PRIMARY KEY,
        effect_id          TEXT NOT NULL,
        result             TEXT NOT NULL,
        conflicting_result TEXT NOT NULL,
        at                 REAL NOT NULL
    );
    CREATE INDEX effect_conflicts_effect ON effect_conflicts(effect_id);
    """,
    # 4: durable values that workflows wait for (approvals, signals), and their waiters
    """
    CREATE TABLE kv (
        key        TEXT PRIMARY KEY,
        value      TEXT,
        version    INTEGER NOT NULL,
        deleted    INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE kv_waiters (
        key           TEXT NOT NULL,
        execution_id  TEXT NOT NULL,
        step_key      TEXT NOT NULL,
        seen_version  INTEGER NOT NULL,
        registered_at REAL NOT NULL,
        PRIMARY KEY (key, execution_id, step_key)
    ) WITHOUT ROWID;
    CREATE INDEX kv_waiters_execution ON kv_waiters(execution_id);
    """,
    # 5: cron schedules; each fire's execution ID derives from the schedule and the slot
    """
    CREATE TABLE schedules (
        name              TEXT PRIMARY KEY,
        workflow          TEXT NOT NULL,
        cron              TEXT NOT NULL,
        tz                TEXT NOT NULL,
        params            TEXT NOT NULL,
        catch_up          TEXT NOT NULL,
        max_late          REAL,
        overlap           TEXT NOT NULL,
        jitter            REAL NOT NULL DEFAULT 0,
        paused            INTEGER NOT NULL DEFAULT 0,
        source            TEXT NOT NULL,
        cursor            REAL NOT NULL,
        next_fire_at      REAL,
        last_fire_at      REAL,
        last_slot         REAL,
        last_execution_id TEXT,
        queued_slot       REAL,
        created_at        REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
    """,
    # 6: ascending list indexes. Every admission inserts at the newest end of both; in a DESC
    # index that is the B-tree's left edge, where SQLite splits pages 50/50 and touches ~40%
    # more pages per commit. SQLite scans an ASC index backwards for ORDER BY .. DESC.
    """
    DROP INDEX executions_admitted;
    CREATE INDEX executions_admitted ON executions(admitted_at, execution_id);
    DROP INDEX executions_status;
    CREATE INDEX executions_status ON executions(status, admitted_at);
    """,
    # 7: the dashboard's reads. Recent failures by when they failed (a partial index: only a
    # failure writes to it, and a failed record never changes again); what each schedule slot
    # came to (fired, late, skipped, queued, missed), the newest of each schedule kept.
    """
    CREATE INDEX executions_failed ON executions(updated_at) WHERE status = 'failed';
    CREATE TABLE schedule_slots (
        name         TEXT NOT NULL,
        slot         REAL NOT NULL,
        outcome      TEXT NOT NULL,
        why          TEXT,
        execution_id TEXT,
        at           REAL NOT NULL,
        count        INTEGER NOT NULL DEFAULT 1,
        PRIMARY KEY (name, slot, outcome)
    ) WITHOUT ROWID;
    CREATE INDEX schedule_slots_at ON schedule_slots(at);
    """,
    # 8: counts that metrics read without a scan (ys/store/sql/observing.py), kept by triggers in
    # the transaction of every write, whichever path writes (an admission batch, an event,
    # gc): executions by workflow and status, effects by status.
    """
    CREATE TABLE execution_counts (
        workflow TEXT NOT NULL,
        status   TEXT NOT NULL,
        n        INTEGER NOT NULL,
        PRIMARY KEY (workflow, status)
    ) WITHOUT ROWID;
    INSERT INTO execution_counts (workflow, status, n)
        SELECT workflow, status, COUNT(*) FROM executions GROUP BY workflow, status;
    CREATE TRIGGER execution_counts_insert AFTER INSERT ON executions BEGIN
        INSERT INTO execution_counts (workflow, status, n) VALUES (NEW.workflow, NEW.status, 1)
            ON CONFLICT (workflow, status) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER execution_counts_update AFTER UPDATE OF status ON executions
    WHEN OLD.status IS NOT NEW.status BEGIN
        UPDATE execution_counts SET n = n - 1
            WHERE workflow = OLD.workflow AND status = OLD.status;
        INSERT INTO execution_counts (workflow, status, n) VALUES (NEW.workflow, NEW.status, 1)
            ON CONFLICT (workflow, status) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER execution_counts_delete AFTER DELETE ON executions BEGIN
        UPDATE execution_counts SET n = n - 1
            WHERE workflow = OLD.workflow AND status = OLD.status;
    END;
    CREATE TABLE effect_counts (status TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO effect_counts (status, n) SELECT status, COUNT(*) FROM effects GROUP BY status;
    CREATE TRIGGER effect_counts_insert AFTER INSERT ON effects BEGIN
        INSERT INTO effect_counts (status, n) VALUES (NEW.status, 1)
            ON CONFLICT (status) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER effect_counts_update AFTER UPDATE OF status ON effects
    WHEN OLD.status IS NOT NEW.status BEGIN
        UPDATE effect_counts SET n = n - 1 WHERE status = OLD.status;
        INSERT INTO effect_counts (status, n) VALUES (NEW.status, 1)
            ON CONFLICT (status) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER effect_counts_delete AFTER DELETE ON effects BEGIN
        UPDATE effect_counts SET n = n - 1 WHERE status = OLD.status;
    END;
    """,
    # 9: every event of every execution in commit order (`ys history --follow --all`): a
    # position per event, given by a trigger in the event's own transaction (one writer, so
    # positions grow in commit order), never reused (AUTOINCREMENT), so a cursor resumes
    # without gaps after a restart. Events already stored get positions in time order.
    """
    CREATE TABLE event_log (
        pos          INTEGER PRIMARY KEY AUTOINCREMENT,
        execution_id TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        at           REAL NOT NULL
    );
    INSERT INTO event_log (execution_id, seq, at)
        SELECT execution_id, seq, at FROM events ORDER BY at, execution_id, seq;
    CREATE TRIGGER event_log_insert AFTER INSERT ON events BEGIN
        INSERT INTO event_log (execution_id, seq, at) VALUES (NEW.execution_id, NEW.seq, NEW.at);
    END;
    """,
    # 10: script versions. Each admission records the SHA-256 of its workflow's script as the
    # daemon last saw it (`scripts`, which the daemon keeps, with whether it is pinned), and
    # each claim the version its delivery runs (in the claimed event).
    """
    ALTER TABLE executions ADD COLUMN script_sha256 TEXT;
    CREATE TABLE scripts (
        workflow   TEXT PRIMARY KEY,
        sha256     TEXT NOT NULL,
        pin        INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL
    ) WITHOUT ROWID;
    """,
    # 11: executions of one workflow, newest first (`ys list --workflow`, the dashboard's
    # filter): a page is read through this index however rare the workflow is among a million.
    """
    CREATE INDEX executions_workflow ON executions(workflow, admitted_at, execution_id);
    """,
    # 12: tags and retries. A record keeps its tags (JSON, NULL for none) and the
    # execution it retries; `execution_tags` holds one row per tag in list order, so that a
    # page of `ys list --tag k=v` is read off one index range however many executions there
    # are. Children are listed newest first through their parent's range of an index too.
    """
    ALTER TABLE executions ADD COLUMN tags TEXT;
    ALTER TABLE executions ADD COLUMN retry_of TEXT;
    CREATE TABLE execution_tags (
        key          TEXT NOT NULL,
        value        TEXT NOT NULL,
        admitted_at  REAL NOT NULL,
        execution_id TEXT NOT NULL,
        PRIMARY KEY (key, value, admitted_at, execution_id)
    ) WITHOUT ROWID;
    CREATE INDEX execution_tags_execution ON execution_tags(execution_id);
    DROP INDEX executions_parent;
    CREATE INDEX executions_parent ON executions(parent_id, admitted_at, execution_id)
        WHERE parent_id IS NOT NULL;
    """,
    # 13: the end of each delivery's log, kept where daemons share a database so
    # that `ys logs` works on a box that did not run it. The SQLite adapter has the table
    # for the contract's sake; its one daemon keeps whole logs on its own disk.
    """
    CREATE TABLE delivery_logs (
        execution_id TEXT NOT NULL,
        attempt      INTEGER NOT NULL,
        daemon_id    TEXT NOT NULL,
        path         TEXT NOT NULL,
        size         INTEGER NOT NULL,
        tail         BLOB NOT NULL,
        ended_at     REAL NOT NULL,
        PRIMARY KEY (execution_id, attempt)
    ) WITHOUT ROWID;
    """,
    # 14: one index per status in list order, ties included: `ys ps` reads each
    # live status's first page off its range and merges them (O(page), however many live).
    """
    DROP INDEX executions_status;
    CREATE INDEX executions_status ON executions(status, admitted_at DESC, execution_id);
    """,
    # 15: hard timeouts. `scripts.timeout` is the workflow's declared timeout
    # (seconds) as the daemon last saw it; every admission, whichever path admits (trigger,
    # child start, schedule, failure handler, retry), gets `deadline_at` = its admission time
    # plus that timeout from the trigger, in the admission's transaction. The store fails a
    # live execution past its deadline (`time_out`); a terminal one has none (index stays
    # small). The trigger's WHEN looks the workflow up in the tiny `scripts` table only.
    """
    ALTER TABLE scripts ADD COLUMN timeout REAL;
    ALTER TABLE executions ADD COLUMN deadline_at REAL;
    CREATE INDEX executions_deadline ON executions(deadline_at) WHERE deadline_at IS NOT NULL;
    CREATE TRIGGER executions_deadline_set AFTER INSERT ON executions
        WHEN (SELECT timeout FROM scripts WHERE workflow = NEW.workflow) IS NOT NULL
    BEGIN
        UPDATE executions SET deadline_at = NEW.admitted_at
            + (SELECT timeout FROM scripts WHERE workflow = NEW.workflow)
        WHERE execution_id = NEW.execution_id;
    END;
    """,
    # 16: concurrency limits (ys/store/sql/concurrency.py). `slot`: the slot group the lease
    # of an execution of a limited workflow holds (counted over leased rows, per workflow and
    # group); `slot_wait`: the group a due execution waits in for a free slot, passed over by
    # claims until a lease of its group ends. The due index leaves the waiting out, so claims
    # and next_due_at never scan them.
    """
    ALTER TABLE executions ADD COLUMN slot TEXT;
    ALTER TABLE executions ADD COLUMN slot_wait TEXT;
    CREATE INDEX executions_slot ON executions(workflow, slot)
        WHERE slot IS NOT NULL AND lease_token IS NOT NULL;
    CREATE INDEX executions_slot_wait ON executions(workflow, slot_wait, due_at, execution_id)
        WHERE slot_wait IS NOT NULL;
    DROP INDEX executions_due;
    CREATE INDEX executions_due ON executions(due_at) WHERE due_at IS NOT NULL AND slot_wait IS NULL;
    """,
    # 17: retries linked both ways (docs/design.md, "Retries and bulk commands"). `retried_by`: the newest retry of an
    # execution (later admitted, ties by the greater ID), set in each retry's transaction and
    # filled here from the retries already made; an execution's retries are read off an index.
    """
    ALTER TABLE executions ADD COLUMN retried_by TEXT;
    CREATE INDEX executions_retry_of ON executions(retry_of, admitted_at, execution_id)
        WHERE retry_of IS NOT NULL;
    UPDATE executions SET retried_by = (
        SELECT r.execution_id FROM executions r WHERE r.retry_of = executions.execution_id
        ORDER BY r.admitted_at DESC, r.execution_id DESC LIMIT 1
    ) WHERE execution_id IN (SELECT retry_of FROM executions WHERE retry_of IS NOT NULL);
    """,
    # 18: workflow pauses (`ys workflows pause W`, ys/store/sql/pauses.py): a row per paused
    # workflow; claims skip its executions in their own transaction.
    """
    CREATE TABLE workflow_pauses (workflow TEXT PRIMARY KEY, paused_at REAL NOT NULL);
    """,
    # 19: the
    # dashboard's pictures (ys/store/sql/charts.py). `activity`: executions started,
    # completed and failed per minute (a day is 1440 rows, however many executions and
    # workflows); `workflow_activity`: the same per workflow and 10 minutes (`minute` a
    # multiple of 10). Kept by triggers in the transaction of every write (as
    # execution_counts), and backfilled for the last two days. `delivery_durations`: how many
    # deliveries that ended in each hour took how long (a log-scale bucket), kept by the core
    # as each delivery ends (ys/store/sql/executions.py: append).
    """
    CREATE TABLE activity (
        minute    INTEGER PRIMARY KEY,
        started   INTEGER NOT NULL DEFAULT 0,
        completed INTEGER NOT NULL DEFAULT 0,
        failed    INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    CREATE TABLE workflow_activity (
        minute    INTEGER NOT NULL,
        workflow  TEXT NOT NULL,
        started   INTEGER NOT NULL DEFAULT 0,
        completed INTEGER NOT NULL DEFAULT 0,
        failed    INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (minute, workflow)
    ) WITHOUT ROWID;
    INSERT INTO workflow_activity (minute, workflow, started)
        SELECT CAST(admitted_at / 600 AS INTEGER) * 10, workflow, COUNT(*) FROM executions
        WHERE admitted_at >= CAST(strftime('%s', 'now') AS REAL) - 172800 GROUP BY 1, 2;
    INSERT INTO workflow_activity (minute, workflow, completed, failed)
        SELECT CAST(updated_at / 600 AS INTEGER) * 10, workflow, SUM(status = 'completed'),
            SUM(status = 'failed') FROM executions
        WHERE status IN ('completed', 'failed')
            AND updated_at >= CAST(strftime('%s', 'now') AS REAL) - 172800 GROUP BY 1, 2
        ON CONFLICT (minute, workflow) DO UPDATE SET
            completed = excluded.completed, failed = excluded.failed;
    INSERT INTO activity (minute, started)
        SELECT CAST(admitted_at / 60 AS INTEGER), COUNT(*) FROM executions
        WHERE admitted_at >= CAST(strftime('%s', 'now') AS REAL) - 172800 GROUP BY 1;
    INSERT INTO activity (minute, completed, failed)
        SELECT CAST(updated_at / 60 AS INTEGER), SUM(status = 'completed'),
            SUM(status = 'failed') FROM executions
        WHERE status IN ('completed', 'failed')
            AND updated_at >= CAST(strftime('%s', 'now') AS REAL) - 172800 GROUP BY 1
        ON CONFLICT (minute) DO UPDATE SET
            completed = excluded.completed, failed = excluded.failed;
    CREATE TRIGGER activity_insert AFTER INSERT ON executions BEGIN
        INSERT INTO activity (minute, started) VALUES (CAST(NEW.admitted_at / 60 AS INTEGER), 1)
            ON CONFLICT (minute) DO UPDATE SET started = started + 1;
        INSERT INTO workflow_activity (minute, workflow, started)
            VALUES (CAST(NEW.admitted_at / 600 AS INTEGER) * 10, NEW.workflow, 1)
            ON CONFLICT (minute, workflow) DO UPDATE SET started = started + 1;
        INSERT INTO activity (minute, completed, failed)
            SELECT CAST(NEW.updated_at / 60 AS INTEGER),
                NEW.status = 'completed', NEW.status = 'failed'
            WHERE NEW.status IN ('completed', 'failed')
            ON CONFLICT (minute) DO UPDATE SET
                completed = completed + excluded.completed, failed = failed + excluded.failed;
        INSERT INTO workflow_activity (minute, workflow, completed, failed)
            SELECT CAST(NEW.updated_at / 600 AS INTEGER) * 10, NEW.workflow,
                NEW.status = 'completed', NEW.status = 'failed'
            WHERE NEW.status IN ('completed', 'failed')
            ON CONFLICT (minute, workflow) DO UPDATE SET
                completed = completed + excluded.completed, failed = failed + excluded.failed;
    END;
    CREATE TRIGGER activity_ended AFTER UPDATE OF status ON executions
    WHEN NEW.status IN ('completed', 'failed') AND OLD.status IS NOT NEW.status BEGIN
        INSERT INTO activity (minute, completed, failed)
            VALUES (CAST(NEW.updated_at / 60 AS INTEGER),
                NEW.status = 'completed', NEW.status = 'failed')
            ON CONFLICT (minute) DO UPDATE SET
                completed = completed + excluded.completed, failed = failed + excluded.failed;
        INSERT INTO workflow_activity (minute, workflow, completed, failed)
            VALUES (CAST(NEW.updated_at / 600 AS INTEGER) * 10, NEW.workflow,
                NEW.status = 'completed', NEW.status = 'failed')
            ON CONFLICT (minute, workflow) DO UPDATE SET
                completed = completed + excluded.completed, failed = failed + excluded.failed;
    END;
    CREATE TABLE delivery_durations (
        hour   INTEGER NOT NULL,
        bucket INTEGER NOT NULL,
        n      INTEGER NOT NULL,
        PRIMARY KEY (hour, bucket)
    ) WITHOUT ROWID;
    """,
    # 20: limits and attempts that hold across daemons (docs/design.md, "Workflow
    # options"). `scripts.concurrency`/`concurrency_key`/`max_attempts`/`on_failure`: the
    # workflow's options as its current script declares them, which every claim and lease
    # sweep reads (not each daemon's own copy). `slot_held_until`: an execution ended without
    # its worker (cancelled at once, timed out) keeps its slot until its daemon says the
    # worker is gone, or until this time (its lease's end: that daemon is dead or frozen).
    # `step_deadline_at`/`step_deadline`: the running step attempt's limit and what to record
    # past it, kept with the lease so that the sweep of a dead daemon's lease records it.
    """
    ALTER TABLE scripts ADD COLUMN concurrency INTEGER;
    ALTER TABLE scripts ADD COLUMN concurrency_key TEXT;
    ALTER TABLE scripts ADD COLUMN max_attempts INTEGER;
    ALTER TABLE scripts ADD COLUMN on_failure TEXT;
    ALTER TABLE executions ADD COLUMN slot_held_until REAL;
    ALTER TABLE executions ADD COLUMN step_deadline_at REAL;
    ALTER TABLE executions ADD COLUMN step_deadline TEXT;
    CREATE INDEX executions_slot_held ON executions(workflow, slot)
        WHERE slot_held_until IS NOT NULL;
    """,
    # 21: recent failures by `failed_at` (the time of a failed execution's last change, NULL
    # for any other status; computed, never written), as PostgreSQL's migration 18, where an
    # index on `updated_at` itself made every step's save rewrite each index of the row
    # (ys/store/sql/overview.py: failed_since).
    """
    ALTER TABLE executions ADD COLUMN failed_at REAL
        GENERATED ALWAYS AS (CASE WHEN status = 'failed' THEN updated_at END) VIRTUAL;
    DROP INDEX executions_failed;
    CREATE INDEX executions_failed ON executions(failed_at) WHERE failed_at IS NOT NULL;
    """,
]


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the file to the newest schema; returns the version it is at."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL)"
    )
    while True:
        with transaction(conn):
            row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
            version = int(row[0])
            if not due(version, len(MIGRATIONS)):
                return version
            for stmt in _statements(MIGRATIONS[version]):
                conn.execute(stmt)
            conn.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                (version + 1, time.time()),
            )


def _statements(script: str) -> list[str]:
    """Split a migration into statements (executescript would COMMIT our transaction). A
    trigger's body holds `;` too: pieces are joined until SQLite calls them complete."""
    out: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                out.append(pending.strip())
            pending = ""
    if pending.strip(" \n;"):
        out.append(pending.strip())
    return out
