"""What each dashboard page shows, read through the store's reads (the ones the API uses, and
the bounded ones of the store's OverviewClient), in the JSON shapes of the API (ys.daemon.views).

Each builder runs in the hub's thread pool: `builder(daemon, query, match) -> context`. Bad
input in a filter is shown on the page (`error`), not as a failed request.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ys import codec, cron
from ys.daemon import overview, timeline, views
from ys.daemon.shapes import RecordJson, StepJson, ValueWaiterJson
from ys.errors import InvalidArgument, NotFoundError, YsError
from ys.store.protocols import STATUSES

if TYPE_CHECKING:
    from ys.daemon.parts import DaemonParts

Query = Mapping[str, Any]  # a MultiDict: getall() for repeated fields
LOG_TAIL = 64 * 1024  # a delivery's log shows its last 64 KiB; the raw file has all of it
PAGE = 50
TIMELINE_TICK = 15.0
HISTORY_SLOTS = 50  # a schedule's slots drawn


def now(d: DaemonParts, q: Query, m: Mapping[str, str]) -> dict[str, Any]:
    return {"o": overview.read(d)}


# -- executions -----------------------------------------------------------------------------


def executions(d: DaemonParts, q: Query, m: Mapping[str, str]) -> dict[str, Any]:
    statuses = [s for s in q.getall("status", []) if s]  # type: ignore[attr-defined]
    f = {
        "status": statuses,
        "workflow": q.get("workflow", ""),
        "prefix": q.get("prefix", ""),
        "since": q.get("since", ""),
    }
    ctx: dict[str, Any] = {
        "f": f,
        "statuses": STATUSES,
        "error": None,
        "items": [],
        "next_page_token": None,
        "page_token": q.get("page_token") or None,
        "workflows": sorted(d.registry.workflows),
        "newest_qs": "",
        "older_qs": "",
    }
    try:
        since = None
        if f["since"]:
            from ys.durations import parse_duration

            since = time.time() - parse_duration(f["since"], "since")
        page = d.store.find(
            statuses=statuses or None,
            workflow=f["workflow"] or None,
            id_prefix=f["prefix"] or None,
            since=since,
            limit=PAGE,
            page_token=ctx["page_token"],
        )
    except YsError as exc:
        ctx["error"] = exc.message
        return ctx
    ctx["items"] = [views.record(r) for r in page.items]
    ctx["next_page_token"] = page.next_page_token
    kept = [
        (k, v)
        for k, v in (("workflow", f["workflow"]), ("prefix", f["prefix"]), ("since", f["since"]))
        if v
    ]
    kept = [("status", s) for s in statuses] + kept
    ctx["newest_qs"] = urlencode(kept)
    ctx["older_qs"] = urlencode([*kept, ("page_token", page.next_page_token or "")])
    return ctx


def _tree_down(
    d: DaemonParts, execution_id: str, depth: int, budget: list[int]
) -> list[dict[str, Any]]:
    """Children, their children, ... (at most 3 levels, 200 executions in all)."""
    if depth >= 3 or budget[0] <= 0:
        return []
    out = []
    for c in d.store.list(parent=execution_id, limit=min(100, budget[0])).items:
        budget[0] -= 1
        out.append(
            {
                "execution_id": c.execution_id,
                "workflow": c.workflow,
                "status": c.status,
                "step_key": c.parent.step_key if c.parent else None,
                "detached": c.parent.detached if c.parent else False,
                "children": _tree_down(d, c.execution_id, depth + 1, budget),
            }
        )
    return out


def _ancestors(d: DaemonParts, parent_id: str | None) -> list[dict[str, Any]]:
    chain: list[dict[str, Any]] = []
    while parent_id and len(chain) < 10:
        r = d.store.get(parent_id)
        if r is None:
            chain.insert(0, {"execution_id": parent_id, "status": "pruned", "workflow": ""})
            break
        chain.insert(
            0, {"execution_id": r.execution_id, "workflow": r.workflow, "status": r.status}
        )
        parent_id = r.parent.execution_id if r.parent else None
    return chain


def _timeline(steps: list[StepJson], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each step with how long it took: from the event before its first record in a
    delivery (the claim or the previous step) to its last record."""
    took: dict[str, float] = {}
    prev_at: float | None = None
    for e in events:
        if e["kind"] == "claimed":
            prev_at = e["at"]
        elif e["kind"] == "step" and prev_at is not None:
            key = e["data"].get("key")
            took[key] = took.get(key, 0.0) + (e["at"] - prev_at)
            prev_at = e["at"]
    return [{**s, "took": took.get(s["key"])} for s in steps]


def _logs(d: DaemonParts, execution_id: str, record: RecordJson) -> list[dict[str, Any]]:
    folder = d.paths.log_dir(execution_id)
    try:
        names = [p for p in folder.iterdir() if p.suffix == ".log" and p.stem.isdigit()]
    except OSError:
        return []
    out = []
    for p in sorted(names, key=lambda p: int(p.stem)):
        n = int(p.stem)
        try:
            total = p.stat().st_size
            with open(p, "rb") as fh:
                fh.seek(max(0, total - LOG_TAIL))
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        live = record["status"] == "running" and record["attempts"] == n
        out.append(
            {
                "attempt": n,
                "bytes": total,
                "text": text,
                "live": live,
                "cut": max(0, total - LOG_TAIL),
            }
        )
    return out


def execution(d: DaemonParts, q: Query, m: Mapping[str, str]) -> dict[str, Any]:
    execution_id = m["id"]
    desc = d.store.describe(execution_id)
    x = views.describe(desc)
    x["effects"] = [views.effect(e) for e in d.store.effects(None, execution_id)]
    x["waiting_on"] = [views.wait(w) for w in d.store.waits(execution_id)]
    raw = d.store.events(execution_id)
    events = [
        {"seq": i + 1, "at": e.at, "kind": e.kind, "data": e.data.to_json()}
        for i, e in enumerate(raw)
    ]
    # "now" in steps of 15 s: a live region re-renders when its HTML changes, and an open
    # bar ending at the very now would change it at every check
    tick = time.time() // TIMELINE_TICK * TIMELINE_TICK
    picture = timeline.as_json(timeline.layout(desc.record, raw, list(desc.children), tick))
    shown = max(0, len(raw) - 200)  # the newest 200
    history = [views.history_event(i + 1, e) for i, e in enumerate(raw) if i >= shown]
    running = d.dispatcher.running.get(execution_id)
    return {
        "x": x,
        "timeline": _timeline(x["steps"], events),
        "tl": picture,
        "history": history,
        "history_skipped": max(0, len(events) - len(history)),
        "ancestors": _ancestors(d, p.execution_id if (p := desc.record.parent) else None),
        "tree": _tree_down(d, execution_id, 0, [200]),
        "logs": _logs(d, execution_id, x),
        "pid": running.proc.pid if running is not None and running.proc is not None else None,
        "done": q.get("done"),
    }


def log_file(d: DaemonParts, execution_id: str, attempt: str) -> Path:
    if not attempt.isdigit():
        raise InvalidArgument("INVALID_ARGUMENT", "the attempt must be a whole number")
    if d.store.get(execution_id) is None:
        raise NotFoundError("EXECUTION_NOT_FOUND", f"execution {execution_id!r} does not exist")
    path: Path = d.paths.log_dir(execution_id) / f"{int(attempt)}.log"
    if not path.is_file():
        raise NotFoundError("NOT_FOUND", f"{execution_id} has no log for attempt {attempt}")
    return path


# -- schedules, effects, values, workflows --------------------------------------------------


def schedules(d: DaemonParts, q: Query, m: Mapping[str, str]) -> dict[str, Any]:
    out = []
    t = time.time()
    for s in d.store.schedules():
        v = views.schedule(s)
        nxt: list[str | None] = []
        if not s.paused:
            off = cron.jitter_offset(s.name, s.jitter)
            try:
                after = max(t, s.cursor)
                nxt = [views.iso(x + off) for x in cron.slots_after(s.cron, s.tz, after, 3)]
            except ValueError:
                nxt = []
        v["next"] = nxt
        v["slots"] = [views.slot(r) for r in d.store.schedule_slots(s.name, limit=10)]
        v["history"] = [
            views.slot_history(r)
            for r in reversed(d.store.schedule_history(s.name, limit=HISTORY_SLOTS))
        ]
        out.append(v)
    return {"schedules": out, "done": q.get("done")}


def effects(d: DaemonParts, q: Query, m: Mapping[str, str]) -> dict[str, Any]:
    status = q.get("status") or ""
    if status not in ("", "pending", "settled", "conflict"):
        status = ""
    if status:
        items = d.store.effects(status)
    else:  # conflicts and pending first, then settled, each oldest first
        conflicts = d.store.effects("conflict")
        seen = {e.effect_id for e in conflicts}
        pending = [e for e in d.store.effects("pending") if e.effect_id not in seen]
        seen |= {e.effect_id for e in pending}
        settled = [e for e in d.store.effects("settled") if e.effect_id not in seen]
        items = conflicts + pending + settled
    # `shown`, not `status`: that name is the template's status macro
    return {"effects": [views.effect(e) for e in items], "shown": status}


def effect(d: DaemonParts, q: Query, m: Mapping[str, str]) -> dict[str, Any]:
    found = d.store.effect(m["effect_id"])
    if found is None:
        raise NotFoundError("NOT_FOUND", f"no effect {m['effect_id']!r}")
    return {"e": views.effect(found)}


def values(d: DaemonParts, q: Query, m: Mapping[str, str]) -> dict[str, Any]:
    prefix = q.get("prefix", "")
    waiters: dict[str, list[ValueWaiterJson]] = {}
    for w in d.store.value_waiters():
        waiters.setdefault(w.key, []).append(views.value_waiter(w))
    entries = [
        {**asdict(e), "updated_at": views.iso(e.updated_at), "waiters": waiters.pop(e.key, [])}
        for e in d.store.value_list(prefix)
    ]
    # keys that are waited for but hold no value yet
    pending = [
        {"key": k, "waiters": ws} for k, ws in sorted(waiters.items()) if k.startswith(prefix)
    ]
    return {"entries": entries, "pending": pending, "prefix": prefix}


def value(d: DaemonParts, q: Query, m: Mapping[str, str]) -> dict[str, Any]:
    key = m["key"]
    found = d.store.value_get(key)
    ws = [views.value_waiter(w) for w in d.store.value_waiters() if w.key == key]
    if found is None and not ws:
        raise NotFoundError("NOT_FOUND", f"no value stored under {key!r}")
    v = (
        None
        if found is None
        else {
            "value": codec.plain(found.value),
            "version": found.version,
            "updated_at": views.iso(found.updated_at),
        }
    )
    return {"key": key, "v": v, "waiters": ws}


_HASHES: dict[tuple[str, int, int], str] = {}


def sha256_of(path: str) -> str | None:
    """The script's SHA-256, remembered while its size and mtime stay the same."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_mtime_ns, st.st_size)
    digest = _HASHES.get(key)
    if digest is None:
        try:
            with open(path, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:
            return None
        if len(_HASHES) > 1000:
            _HASHES.clear()
        _HASHES[key] = digest
    return digest


def workflows(d: DaemonParts, q: Query, m: Mapping[str, str]) -> dict[str, Any]:
    items = sorted(d.registry.workflows.values(), key=lambda w: w.name)
    pauses = d.store.workflow_pauses()
    until = (time.time() // 3600 + 1) * 3600
    days = d.store.activity_by_workflow(until - 86400, until, 3600.0)  # one grouped read
    return {
        "workflows": [
            {
                **w.to_json(),
                "sha256": sha256_of(w.path),
                "paused": w.name in pauses,
                "day": days.get(w.name),
            }
            for w in items
        ],
        "folder": str(d.registry.folder),
        "done": q.get("done"),
    }
