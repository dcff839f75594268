"""`ys describe` for people: the record panel (with its parent), what it waits on, then steps,
deliveries, children and effects."""

from __future__ import annotations

from typing import Any

from ys.commands import _render as r
from ys.durations import format_duration


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    return f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MiB"


def _span(start: str | None, end: str | None) -> str:
    a, b = r.when(start), r.when(end)
    return format_duration((b - a).total_seconds()) if a and b else r.DASH


def _steps(d: dict[str, Any]) -> Any:
    if not d.get("steps"):
        return None
    t = r.table("KEY", "KIND", "STATUS", "ATTEMPTS", "WAKE", "VALUE")
    for s in d["steps"]:
        r.add_row(
            t,
            s["key"],
            s.get("kind", ""),
            r.status(s.get("status")),
            str(s.get("attempts", "")),
            r.relative(s.get("wake_at")),
            r.compact(s["value"], 60) if "value" in s else r.DASH,
        )
    return r.fit(t, "KEY", "VALUE")


def _failed_attempts(d: dict[str, Any]) -> Any:
    """Each failed attempt of each step with its error (a retried step that then succeeded
    keeps them here, its value is its result)."""
    rows = [(s["key"], f) for s in d.get("steps") or [] for f in s.get("failed_attempts") or []]
    if not rows:
        return None
    t = r.table("STEP", "ATTEMPT", "FAILED", "ERROR")
    for key, f in rows:
        error = f.get("error") or {}
        r.add_row(
            t,
            key,
            str(f.get("attempt", "")),
            r.local(f.get("at")),
            r.cut(f"{error.get('name', '')}: {error.get('message', '')}", 200),
        )
    return r.fit(t, "STEP", "ERROR")


def _deliveries(d: dict[str, Any]) -> Any:
    if not d.get("deliveries"):
        return None
    t = r.table("ATTEMPT", "SCRIPT", "STARTED", "ENDED", "TOOK", "OUTCOME")
    for dl in d["deliveries"]:
        outcome = dl.get("outcome") or ("running" if dl.get("ended_at") is None else r.DASH)
        if dl.get("detail"):
            outcome += f": {dl['detail']}"
        r.add_row(
            t,
            str(dl.get("attempt")),
            _short(dl.get("script_sha256")),
            r.local(dl.get("started_at")),
            r.local(dl.get("ended_at")),
            _span(dl.get("started_at"), dl.get("ended_at")),
            r.status(outcome) if outcome in r.STATUS_STYLE else r.cut(outcome, 80),
        )
    return r.fit(t, "OUTCOME")


def _warnings(d: dict[str, Any]) -> Any:
    """What deliveries warned of (a step key that changes on every run, ...), by attempt."""
    rows = [
        (dl.get("attempt"), w) for dl in d.get("deliveries") or [] for w in dl.get("warnings") or []
    ]
    if not rows:
        return None
    t = r.table("ATTEMPT", "WARNING")
    for attempt, warning in rows:
        r.add_row(t, str(attempt), warning)
    return t  # wrapped, not cut: the warning says what to do


def _short(sha: str | None) -> str:
    return sha[:12] if sha else r.DASH


def _script(d: dict[str, Any]) -> str:
    """The version admitted, and whether the script changed since."""
    text = _short(d.get("script_sha256"))
    if d.get("script_changed"):
        text += f" (changed since admission: now {_short(d.get('script_sha256_now'))})"
    return text


def _children(d: dict[str, Any]) -> Any:
    if not d.get("children"):
        return None
    t = r.table("ID", "WORKFLOW", "STATUS", "STEP", "DETACHED")
    for c in d["children"]:
        r.add_row(
            t,
            c["execution_id"],
            c.get("workflow", ""),
            r.status(c.get("status")),
            str(c.get("step_key") or r.DASH),
            "yes" if c.get("detached") else "no",
        )
    return r.fit(t, "ID", "STEP")


def _effects(d: dict[str, Any]) -> Any:
    if not d.get("effects"):
        return None
    t = r.table("EFFECT", "OPERATION", "STATUS", "RESULT")
    for e in d["effects"]:
        r.add_row(
            t,
            str(e.get("effect_id", "")),
            str(e.get("operation", "")),
            r.effect_status(e),
            r.compact(e.get("result"), 60) if e.get("status") == "settled" else r.DASH,
        )
    return r.fit(t, "EFFECT", "RESULT")


def _slot(slot: Any) -> str:
    """The slot group's key value as people read it ("*": the whole workflow)."""
    if slot in (None, "*"):
        return ""
    return " (its key's field missing)" if slot == "missing" else f" for {slot}"


def _waiting_on(d: dict[str, Any]) -> Any:
    """Store keys it waits for (`ys store put` wakes it) and effects it waits to settle."""
    if not d.get("waiting_on"):
        return None
    t = r.table("KIND", "KEY", "STEP", "SINCE", "WAKE")
    for w in d["waiting_on"]:
        store = w.get("kind") == "store"
        what = w.get("key") if store else w.get("effect_id")
        if w.get("kind") == "concurrency":  # a slot of its workflow's limit (one key value)
            what = "a slot of " + str(w.get("workflow")) + _slot(w.get("slot"))
        r.add_row(
            t,
            str(w.get("kind", "")),
            str(what),
            str(w.get("step_key") or r.DASH),
            r.relative(w.get("since")),
            r.relative(w.get("wake_at")),
        )
    return r.fit(t, "KEY", "STEP")


def show(d: dict[str, Any]) -> None:
    g = r.grid()
    r.record_rows(g, d)
    r.add_row(
        g,
        "history",
        f"{d.get('history_length', 0)} events, {_size(int(d.get('history_bytes') or 0))}",
    )
    if d.get("lease_expires_at"):
        r.add_row(g, "lease ends", r.local_and_relative(d["lease_expires_at"]))
    if d.get("script_sha256"):
        r.add_row(g, "script", _script(d))
    r.panel(d["execution_id"], g)
    if d.get("waiting_on"):
        r.section("Waiting on", _waiting_on(d), "")
    r.section("Steps", _steps(d), "no steps yet")
    failed = _failed_attempts(d)
    if failed is not None:
        r.section("Failed attempts", failed, "")
    r.section("Deliveries", _deliveries(d), "not delivered yet")
    warned = _warnings(d)
    if warned is not None:
        r.section("Warnings", warned, "")
    if d.get("children"):
        r.section("Children", _children(d), "")
    if d.get("effects"):
        r.section("Effects", _effects(d), "")
