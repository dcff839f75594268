"""Output for people: rich tables and panels, statuses in colour, times local and relative,
long values cut. Only the people path imports this (never `--json`), so rich loads only there.

Colour follows rich: off with NO_COLOR and when stdout is not a terminal. When stdout is not a
terminal, tables lose their boxes and lines are not wrapped to 80 columns, so `grep` and `cut`
see one row per line.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from typing import Any

from rich import box
from rich.console import Console, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ys.durations import format_duration

STATUS_STYLE = {
    "admitted": "blue", "running": "cyan", "suspended": "magenta",
    "completed": "green", "failed": "red", "cancelled": "yellow",
}
EVENT_STYLE = {"completed": "green", "failed": "red", "cancelled": "yellow", "claimed": "cyan"}
DASH = "-"

_out: Console | None = None
_err: Console | None = None


def out() -> Console:
    global _out
    if _out is None:
        tty = sys.stdout.isatty()
        width = None if tty or os.environ.get("COLUMNS") else 1000
        _out = Console(highlight=False, width=width, soft_wrap=not tty)
    return _out


def err() -> Console:
    global _err
    if _err is None:
        _err = Console(stderr=True, highlight=False, soft_wrap=True)
    return _err


def note(message: str) -> None:
    """A diagnostic for people, on stderr (data stays on stdout)."""
    sys.stdout.flush()
    err().print(Text(message, style="dim"))


# -- values ---------------------------------------------------------------------------------


def cut(text: str, limit: int) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def compact(value: Any, limit: int = 60) -> str:
    if isinstance(value, str):
        return cut(value, limit)
    return cut(json.dumps(value, ensure_ascii=False), limit)


def status(s: str | None, extra: str = "") -> Text:
    return Text((s or DASH) + extra, style=STATUS_STYLE.get(s or "", ""))


def when(iso: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(iso) if iso else None


def relative(iso: str | None, now: float | None = None) -> str:
    t = when(iso)
    if t is None:
        return DASH
    delta = t.timestamp() - (time.time() if now is None else now)
    if abs(delta) < 1:
        return "now"
    return f"in {format_duration(delta)}" if delta > 0 else f"{format_duration(delta)} ago"


def local(iso: str | None, ms: bool = False) -> str:
    t = when(iso)
    if t is None:
        return DASH
    lt = t.astimezone()
    text = lt.strftime("%Y-%m-%d %H:%M:%S")
    return text + f".{lt.microsecond // 1000:03d}" if ms else text


def local_and_relative(iso: str | None) -> str:
    return DASH if iso is None else f"{local(iso)} ({relative(iso)})"


def outcome(record: dict[str, Any], limit: int = 60) -> Text:
    o = record.get("outcome") or {}
    if o.get("status") == "completed":
        return Text(compact(o.get("result"), limit))
    if o.get("status") == "failed":
        e = o.get("error") or {}
        return Text(cut(f"{e.get('name', 'Error')}: {e.get('message', '')}", limit), style="red")
    return Text(o.get("status", ""), style=STATUS_STYLE.get(o.get("status", ""), ""))


# -- layouts --------------------------------------------------------------------------------


def table(*columns: str) -> Table:
    tty = out().is_terminal
    t = Table(box=box.SIMPLE_HEAD if tty else None, show_edge=tty, pad_edge=False,
              header_style="bold" if tty else "", padding=(0, 1) if tty else (0, 2, 0, 0))
    for c in columns:
        t.add_column(c, overflow="ellipsis", no_wrap=True)
    return t


def grid() -> Table:
    g = Table.grid(padding=(0, 2))
    g.add_column(style="bold", no_wrap=True)
    g.add_column(overflow="fold")
    return g


def panel(title: str, body: RenderableType) -> None:
    if out().is_terminal:
        out().print(Panel(body, title=Text(title, style="bold"), title_align="left",
                          box=box.ROUNDED, expand=False))
    else:
        out().print(Text(title, style="bold"))
        out().print(body)


def section(title: str, body: RenderableType | None, empty: str) -> None:
    out().print()
    out().print(Text(title, style="bold"))
    out().print(body if body is not None else Text(f"  {empty}", style="dim"))


# -- records --------------------------------------------------------------------------------


def record_rows(g: Table, r: dict[str, Any]) -> None:
    cancel = " (cancel requested)" if r.get("cancel_requested") and r["status"] not in (
        "completed", "failed", "cancelled") else ""
    g.add_row("workflow", r["workflow"])
    g.add_row("status", status(r["status"], cancel))
    o = r.get("outcome") or {}
    if o.get("status") == "completed":
        g.add_row("result", compact(o.get("result"), 400))
    elif o.get("status") == "failed":
        g.add_row("error", outcome(r, 400))
    g.add_row("params", compact(r.get("params"), 400))
    if r.get("context"):
        g.add_row("context", compact(r["context"], 400))
    g.add_row("admitted", local_and_relative(r.get("admitted_at")))
    g.add_row("updated", local_and_relative(r.get("updated_at")))
    g.add_row("due", local_and_relative(r.get("due_at")) if r.get("due_at") else "no wake pending")
    g.add_row("attempts", str(r.get("attempts", 0)))
    if r.get("lease_holder"):
        g.add_row("lease", str(r["lease_holder"]))
    p = r.get("parent")
    if p:
        how = "detached child" if p.get("detached") else "child"
        g.add_row("parent", f"{p.get('execution_id')} ({how}, step {p.get('step_key')})")


def show_record(r: dict[str, Any]) -> None:
    g = grid()
    record_rows(g, r)
    panel(r["execution_id"], g)


def executions(records: list[dict[str, Any]], ps: bool = False) -> None:
    if ps:
        t = table("ID", "WORKFLOW", "STATUS", "DUE", "ATTEMPT", "LEASE", "ADMITTED")
        for r in records:
            t.add_row(cut(r["execution_id"], 40), r["workflow"], status(r["status"]),
                      relative(r.get("due_at")), str(r.get("attempts", 0)),
                      r.get("lease_holder") or DASH, relative(r.get("admitted_at")))
    else:
        t = table("ID", "WORKFLOW", "STATUS", "ADMITTED", "UPDATED", "ATTEMPTS", "OUTCOME")
        for r in records:
            t.add_row(cut(r["execution_id"], 40), r["workflow"], status(r["status"]),
                      relative(r.get("admitted_at")), relative(r.get("updated_at")),
                      str(r.get("attempts", 0)), outcome(r, 50))
    out().print(t)


def event_line(e: dict[str, Any]) -> Text:
    line = Text()
    line.append(f"{e['seq']:>4}  ", style="dim")
    line.append(local(e.get("at"), ms=True) + "  ")
    line.append(f"{e['kind']:<16}", style=EVENT_STYLE.get(e["kind"], "bold"))
    if e.get("data"):
        line.append(" " + compact(e["data"], 200))
    return line
