"""Export and import, on any SQL engine: every record a database holds as plain records (the
export's lines, `base.ExportLine`), read in one snapshot and written back in transactions of a batch each
(`ys export`, `ys import`, `ys migrate`; the lines around them: ys/store/sql/transfer_lines.py).

The format (version `FORMAT_VERSION`) names each kind's columns below; what a database keeps
for itself is left out: leases (a daemon's, not the data's), the count tables, the event log
and the tag index (their triggers and `tag_rows` make them again). Canonical JSON columns stay
text (their bytes are the value's identity, docs/design.md), flags are booleans, a log tail
is base64. An execution leased when it is read is written as released when its lease ends
(a RELEASED event with reason "moved" at the lease's end, folded as recovery would): it is
due again where it lands, and its
effects and steps go with it, so it runs on from where it was and nothing runs twice.

Import is idempotent: a record already there with the same contents (an execution: the same
history) is skipped; one that differs is a conflict, left as it is and reported.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, cast

from ys.store.base import Cell, ExecutionLine, ExportLine, RecordLine, Row
from ys.store.eventdata import ReleasedData
from ys.store.records import RELEASED, Event
from ys.store.sql.rows import project, row_to_record

FORMAT_VERSION = 1

EXECUTION = (
    "execution_id",
    "workflow",
    "params",
    "context",
    "status",
    "outcome",
    "admitted_at",
    "updated_at",
    "due_at",
    "covered_due_at",
    "prior_status",
    "attempts",
    "parent_id",
    "parent_step",
    "parent_detached",
    "cancel_requested",
    "history_length",
    "history_bytes",
    "script_sha256",
    "tags",
    "retry_of",
    "retried_by",
    "deadline_at",
    "slot_wait",
)
# An execution's own rows: part name -> (table, the column naming the execution, columns,
# order within the execution).
PARTS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "events": ("events", "execution_id", ("seq", "at", "kind", "data"), "seq"),
    "steps": (
        "steps",
        "execution_id",
        ("key", "kind", "status", "value", "attempts", "wake_at", "updated_at", "first_seq"),
        "key",
    ),
    "starts": (
        "start_requests",
        "caller_id",
        ("step_key", "workflow", "params", "detached", "target_id", "created_at"),
        "step_key",
    ),
    "effect_begins": (
        "effect_begins",
        "execution_id",
        ("effect_id", "step_key", "at"),
        "effect_id, step_key",
    ),
    "effect_waits": (
        "effect_waiters",
        "execution_id",
        ("effect_id", "step_key", "wake_at", "registered_at"),
        "effect_id, step_key",
    ),
    "value_waits": (
        "kv_waiters",
        "execution_id",
        ("key", "step_key", "seen_version", "registered_at"),
        "key, step_key",
    ),
    "logs": (
        "delivery_logs",
        "execution_id",
        ("attempt", "daemon_id", "path", "size", "tail", "ended_at"),
        "attempt",
    ),
}
# The records that stand alone: kind -> (table, key column, columns, parts: name -> (table,
# the column naming the record, columns, order)).
KINDS: dict[
    str, tuple[str, str, tuple[str, ...], dict[str, tuple[str, str, tuple[str, ...], str]]]
] = {
    "script": ("scripts", "workflow", ("workflow", "sha256", "pin", "updated_at", "timeout"), {}),
    "value": ("kv", "key", ("key", "value", "version", "deleted", "updated_at"), {}),
    "effect": (
        "effects",
        "effect_id",
        ("effect_id", "operation", "input", "status", "result", "created_at", "settled_at"),
        {
            "conflicts": (
                "effect_conflicts",
                "effect_id",
                ("result", "conflicting_result", "at"),
                "id",
            )
        },
    ),
    "schedule": (
        "schedules",
        "name",
        (
            "name",
            "workflow",
            "cron",
            "tz",
            "params",
            "catch_up",
            "max_late",
            "overlap",
            "jitter",
            "paused",
            "source",
            "cursor",
            "next_fire_at",
            "last_fire_at",
            "last_slot",
            "last_execution_id",
            "queued_slot",
            "created_at",
        ),
        {
            "slots": (
                "schedule_slots",
                "name",
                ("slot", "outcome", "why", "execution_id", "at", "count"),
                "slot, outcome",
            )
        },
    ),
}
# What every line kind holds (the lines' check: ys/store/sql/transfer_lines.py).
COLUMNS: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "execution": (EXECUTION, {name: p[2] for name, p in PARTS.items()}),
    **{k: (v[2], {name: p[2] for name, p in v[3].items()}) for k, v in KINDS.items()},
}
ORDER = ("script", "value", "effect", "schedule", "execution")  # the kinds, in export order
FLAGS = frozenset({"parent_detached", "cancel_requested", "detached", "deleted", "paused", "pin"})
BYTES = frozenset({"tail"})
BATCH = 500  # executions read per statement, records written per transaction
MOVED = "moved"  # a RELEASED event's reason: leased when exported, due where imported


Getter = Callable[[Mapping[str, object]], Any]
_SHAPES: dict[tuple[str, ...], tuple[list[int], list[int], Getter]] = {}


def _shape(names: tuple[str, ...]) -> tuple[list[int], list[int], Getter]:
    """Where a row's flags and bytes are, and a getter of its values in order (cached)."""
    shape = _SHAPES.get(names)
    if shape is None:
        flags = [i for i, n in enumerate(names) if n in FLAGS]
        raw = [i for i, n in enumerate(names) if n in BYTES]
        get = itemgetter(*names) if len(names) > 1 else lambda d: (d[names[0]],)
        shape = _SHAPES[names] = (flags, raw, get)
    return shape


def _out(names: tuple[str, ...], row: Sequence[Any]) -> Row:
    """A row as the format has it: flags as booleans, bytes as base64, the rest as read."""
    flags, raw, _ = _shape(names)
    d: Row = dict(zip(names, row, strict=True))
    for i in flags:
        if row[i] is not None:
            d[names[i]] = bool(row[i])
    for i in raw:
        if row[i] is not None:
            d[names[i]] = base64.b64encode(bytes(row[i])).decode("ascii")
    return d


def _in(names: tuple[str, ...], d: Mapping[str, object]) -> tuple[Any, ...]:
    """A record's values as a row to insert (base64 back to bytes)."""
    _, raw, get = _shape(names)
    values = get(d)
    if not raw:
        return values  # type: ignore[no-any-return]
    out = list(values)
    for i in raw:
        if out[i] is not None:
            out[i] = base64.b64decode(out[i])
    return tuple(out)


# -- export ----------------------------------------------------------------------------------


def export_tx(
    c: Any,
    emit: Callable[[ExportLine], None],
    *,
    since: float | None = None,
    statuses: Sequence[str] = (),
    workflow: str | None = None,
) -> dict[str, int]:
    """Every record, kind by kind (`ORDER`), to `emit`, read on `c` (one snapshot). The filters
    narrow the executions only (admitted at or after `since`, in `statuses`, of `workflow`):
    scripts, values, effects and schedules are whole. Returns the count per kind. Memory
    holds one batch at a time, however many records there are."""
    counts = dict.fromkeys(ORDER, 0)
    for kind in ORDER[:-1]:
        table, key, cols, parts = KINDS[kind]
        after: Any = None
        while True:
            rows = c.execute(
                f"SELECT {', '.join(cols)} FROM {table}"
                + (f" WHERE {key} > ?" if after is not None else "")
                + f" ORDER BY {key} LIMIT {BATCH}",
                (after,) if after is not None else (),
            ).fetchall()
            if not rows:
                break
            records = [_out(cols, r) for r in rows]
            keys = [r[key] for r in records]
            found = {name: _parts(c, part, keys) for name, part in parts.items()}
            for r in records:
                line: RecordLine = {"kind": kind, **r}
                for name in parts:
                    line[name] = found[name].get(r[key], [])
                emit(line)
            counts[kind] += len(records)
            after = keys[-1]
    where: list[str] = []
    args: list[Any] = []
    if since is not None:
        where.append("admitted_at >= ?")
        args.append(since)
    if statuses:
        where.append(f"status IN ({','.join('?' * len(statuses))})")
        args += list(statuses)
    if workflow is not None:
        where.append("workflow = ?")
        args.append(workflow)
    after = None
    while True:
        cond = where + (["execution_id > ?"] if after is not None else [])
        rows = c.execute(
            f"SELECT {', '.join(EXECUTION)}, lease_token IS NOT NULL, lease_expires_at FROM executions"
            + (f" WHERE {' AND '.join(cond)}" if cond else "")
            + f" ORDER BY execution_id LIMIT {BATCH}",
            (*args, *([after] if after is not None else [])),
        ).fetchall()
        if not rows:
            break
        records = [_out(EXECUTION, r[:-2]) for r in rows]
        ids = [r["execution_id"] for r in records]
        by_part = {name: _parts(c, part, ids) for name, part in PARTS.items()}
        for r, row in zip(records, rows, strict=True):
            eid = r["execution_id"]
            done: ExecutionLine = {
                "kind": "execution",
                "execution": r,
                "events": by_part["events"].get(eid, []),
                "steps": by_part["steps"].get(eid, []),
                "starts": by_part["starts"].get(eid, []),
                "effect_begins": by_part["effect_begins"].get(eid, []),
                "effect_waits": by_part["effect_waits"].get(eid, []),
                "value_waits": by_part["value_waits"].get(eid, []),
                "logs": by_part["logs"].get(eid, []),
            }
            if row[-2]:
                _moved(done, row[-1])
            emit(done)
        counts["execution"] += len(records)
        after = ids[-1]
    return counts


def _parts(
    c: Any, part: tuple[str, str, tuple[str, ...], str], keys: list[Any]
) -> dict[Cell, list[Row]]:
    table, owner, cols, order = part
    rows = c.execute(
        f"SELECT {owner}, {', '.join(cols)} FROM {table} WHERE {owner} IN "
        f"({','.join('?' * len(keys))}) ORDER BY {owner}, {order}",
        keys,
    ).fetchall()
    out: dict[Cell, list[Row]] = {}
    for row in rows:
        out.setdefault(row[0], []).append(_out(cols, row[1:]))
    return out


_RECORD = (
    "execution_id, workflow, params, context, status, outcome, admitted_at, updated_at, due_at, "
    "covered_due_at, prior_status, attempts, parent_id, parent_step, parent_detached, "
    "cancel_requested, history_length, script_sha256, tags, retry_of, retried_by"
).split(", ")  # rows.RECORD_COLUMNS, the order row_to_record reads


def _moved(line: ExecutionLine, expires: float) -> None:
    """A leased execution as it is once its lease ends: released then, due (as a daemon's
    recovery would leave it, `release_expired_tx`). The lease's end is a fact of the
    database, so two exports of it write the same lines (an import again skips it)."""
    e = line["execution"]
    prior = row_to_record(tuple(e[k] for k in _RECORD))
    at = max(expires, cast(float, e["updated_at"]))
    record, rows, nbytes = project(prior, [Event(RELEASED, at, ReleasedData(MOVED, at))])
    e.update(
        status=record.status,
        updated_at=record.updated_at,
        due_at=record.due_at,
        covered_due_at=record.covered_due_at,
        prior_status=record.prior_status,
        history_length=record.history_length,
        history_bytes=cast(int, e["history_bytes"]) + nbytes,
    )
    line["events"] += [dict(zip(("seq", "at", "kind", "data"), r[1:], strict=True)) for r in rows]


# -- import ----------------------------------------------------------------------------------


def timed_workflows(c: Any) -> set[str]:
    """The workflows whose script declares a timeout: an admission trigger gives their new
    executions a deadline, which an import puts back to the one exported."""
    return {r[0] for r in c.execute("SELECT workflow FROM scripts WHERE timeout IS NOT NULL")}


def import_tx(
    c: Any, records: Iterable[ExportLine], timed: set[str]
) -> tuple[dict[str, dict[str, int]], list[tuple[str, str]]]:
    """Write `records` (one transaction: the caller's) where they are not there yet. Returns
    the counts per kind ({"imported", "skipped", "conflicts"}) and the conflicts (kind, name):
    records there already with other contents, left as they are. The new executions' rows
    go in table by table, one statement each for the whole batch."""
    counts = {k: {"imported": 0, "skipped": 0, "conflicts": 0} for k in ORDER}
    conflicts: list[tuple[str, str]] = []
    executions: list[ExecutionLine] = []
    for line in records:  # each of the kind it names (the lines' check: transfer_lines)
        kind = cast(str, line["kind"])
        if kind == "execution":
            executions.append(cast(ExecutionLine, line))
            continue
        rec = cast(RecordLine, line)
        name = rec[KINDS[kind][1]]
        outcome = _standalone(c, kind, rec)
        if kind == "script" and rec.get("timeout") is not None:
            timed.add(cast(str, rec["workflow"]))
        counts[kind][outcome] += 1
        if outcome == "conflicts":
            conflicts.append((kind, str(name)))
    for eid, outcome in _executions(c, executions, timed):
        counts["execution"][outcome] += 1
        if outcome == "conflicts":
            conflicts.append(("execution", eid))
    return counts, conflicts


def _insert(c: Any, table: str, names: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    if rows:
        c.executemany(
            f"INSERT INTO {table} ({', '.join(names)}) VALUES ({','.join('?' * len(names))})",
            rows,
        )


def _standalone(c: Any, kind: str, rec: RecordLine) -> str:
    table, key, cols, parts = KINDS[kind]
    row = c.execute(
        f"SELECT {', '.join(cols)} FROM {table} WHERE {key} = ?", (rec[key],)
    ).fetchone()
    if row is not None:
        there = _out(cols, row)
        return "skipped" if there == {k: rec[k] for k in cols} else "conflicts"
    _insert(c, table, cols, [_in(cols, rec)])
    for name, (ptable, owner, pcols, _) in parts.items():
        rows = cast(list[Row], rec[name])
        _insert(c, ptable, (owner, *pcols), [(rec[key], *_in(pcols, p)) for p in rows])
    return "imported"


def _history(rec: ExecutionLine) -> list[tuple[Any, ...]]:
    return [(v["seq"], v["at"], v["kind"], v["data"]) for v in rec["events"]]


def _executions(c: Any, recs: list[ExecutionLine], timed: set[str]) -> list[tuple[str, str]]:
    """The batch's executions written where new; (ID, outcome) of each, in order."""
    if not recs:
        return []
    ids = [cast(str, r["execution"]["execution_id"]) for r in recs]
    there = {
        r[0]
        for r in c.execute(
            f"SELECT execution_id FROM executions WHERE execution_id IN ({','.join('?' * len(ids))})",
            ids,
        ).fetchall()
    }
    out: list[tuple[str, str]] = []
    new: dict[str, ExecutionLine] = {}
    for eid, rec in zip(ids, recs, strict=True):
        if eid in there:
            stored = c.execute(
                "SELECT seq, at, kind, data FROM events WHERE execution_id = ? ORDER BY seq", (eid,)
            ).fetchall()
            same = [tuple(r) for r in stored] == _history(rec)
        elif eid in new:  # twice in one input
            same = _history(new[eid]) == _history(rec)
        else:
            new[eid] = rec
            out.append((eid, "imported"))
            continue
        out.append((eid, "skipped" if same else "conflicts"))
    fresh = list(new.values())
    _insert(c, "executions", EXECUTION, [_in(EXECUTION, r["execution"]) for r in fresh])
    tags = [
        (k, v, r["execution"]["admitted_at"], r["execution"]["execution_id"])
        for r in fresh
        if r["execution"]["tags"]
        for k, v in json.loads(cast(str, r["execution"]["tags"])).items()
    ]
    _insert(c, "execution_tags", ("key", "value", "admitted_at", "execution_id"), tags)
    for name, (table, owner, cols, _) in PARTS.items():
        rows = [(eid, *_in(cols, p)) for eid, r in new.items() for p in _part(r, name)]
        _insert(c, table, (owner, *cols), rows)
    for r in fresh:  # an admission trigger gave these a deadline of its own
        e = r["execution"]
        if e["workflow"] in timed:
            c.execute(
                "UPDATE executions SET deadline_at = ? WHERE execution_id = ?",
                (e["deadline_at"], e["execution_id"]),
            )
    return out


def _part(line: ExecutionLine, name: str) -> list[Row]:
    """An execution's rows of one part (a name of `PARTS`)."""
    return cast(list[Row], line[name])  # type: ignore[literal-required]


def holds_executions(c: Any) -> bool:
    return c.execute("SELECT 1 FROM executions LIMIT 1").fetchone() is not None


def count_tx(c: Any) -> dict[str, int]:
    """How many records of each kind the database holds (a migration's totals)."""
    out = {}
    for kind in ORDER[:-1]:
        out[kind] = int(c.execute(f"SELECT COUNT(*) FROM {KINDS[kind][0]}").fetchone()[0])
    out["execution"] = int(c.execute("SELECT COUNT(*) FROM executions").fetchone()[0])
    return out


class Transfers:
    """The store's export and import (`ys export`, `ys import`, `ys migrate`)."""

    _core: Any

    def export_records(
        self,
        emit: Callable[[ExportLine], None],
        *,
        since: float | None = None,
        statuses: Sequence[str] = (),
        workflow: str | None = None,
    ) -> dict[str, int]:
        return self._core.snapshot(  # type: ignore[no-any-return]
            lambda c: export_tx(c, emit, since=since, statuses=statuses, workflow=workflow)
        )

    def import_records(
        self,
        records: Iterable[ExportLine],
        on_batch: Callable[[dict[str, dict[str, int]], list[tuple[str, str]]], None],
    ) -> None:
        timed: set[str] = self._core.read(timed_workflows)
        batch: list[ExportLine] = []

        def flush() -> None:
            nonlocal timed
            mine = set(timed)  # the writer may run a body again: it starts from a copy

            def body(c: Any) -> Any:
                seen = set(mine)
                return (*import_tx(c, batch, seen), seen)

            counts, conflicts, timed = self._core.write(body)
            batch.clear()
            on_batch(counts, conflicts)

        for rec in records:
            batch.append(rec)
            if len(batch) >= BATCH:
                flush()
        if batch:
            flush()

    def holds_executions(self) -> bool:
        return self._core.read(holds_executions)  # type: ignore[no-any-return]

    def record_counts(self) -> dict[str, int]:
        return self._core.read(count_tx)  # type: ignore[no-any-return]
