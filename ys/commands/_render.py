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
from typing import Any

from rich import box
from rich.console import Console, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text as Text  # re-exported: commands build cells with it

from ys.durations import format_duration
from ys.durations import relative as relative  # re-exported for the commands

STATUS_STYLE = {
    "admitted": "blue",
    "running": "cyan",
    "suspended": "magenta",
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
}
EVENT_STYLE = {"completed": "green", "failed": "red", "cancelled": "yellow", "claimed": "cyan"}
EFFECT_STYLE = {"pending": "magenta", "settled": "green"}
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


def show(*renderables: RenderableType) -> None:
    """Print to stdout; off a terminal, without the spaces that pad table cells at line ends."""
    console = out()
    if console.is_terminal:
        console.print(*renderables, sep="\n")
        return
    with console.capture() as captured:
        console.print(*renderables, sep="\n")
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def note(message: str) -> None:
    """A diagnostic for people, on stderr (data stays on stdout)."""
    sys.stdout.flush()
    err().print(Text(message, style="dim"))


# -- values ---------------------------------------------------------------------------------


def cut(text: str, limit: int) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


ID_WIDTH = 64  # an ID in a table; 256-byte IDs would pad every row past 256 columns


def ident(text: str, limit: int = ID_WIDTH) -> str:
    """An ID cut in the middle (`order-…-v1`): IDs often differ at the end (a slot, a
    counter), so both ends stay. --json and `ys get` show it whole."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


def compact(value: Any, limit: int = 60) -> str:
    if isinstance(value, str):
        return cut(value, limit)
    return cut(json.dumps(value, ensure_ascii=False), limit)


def status(s: str | None, extra: str = "") -> Text:
    return Text((s or DASH) + extra, style=STATUS_STYLE.get(s or "", ""))


def effect_status(e: dict[str, Any]) -> Text:
    """`settled`, `pending`, or `settled, 2 conflicts` in red: a conflict needs an operator."""
    n = len(e.get("conflicts") or [])
    if n:
        return Text(f"{e.get('status')}, {n} conflict{'s' if n != 1 else ''}", style="red")
    return Text(str(e.get("status") or DASH), style=EFFECT_STYLE.get(e.get("status") or "", ""))


def when(iso: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(iso) if iso else None


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
    t = Table(
        box=box.SIMPLE_HEAD if tty else None,
        show_edge=False,
        pad_edge=False,
        header_style="bold" if tty else "",
        padding=(0, 1, 0, 0) if tty else (0, 2, 0, 0),
    )
    for c in columns:
        t.add_column(c, overflow="ellipsis", no_wrap=True)
    return t


def fit(t: Table, *elastic: str) -> Table:
    """On a terminal too narrow for the table, shrink only the `elastic` columns, the last
    given first (their cells end in …): rich would shrink every column alike, to `STAT…`."""
    console = out()
    if not console.is_terminal:
        return t
    from rich.measure import Measurement

    unbounded = console.options.update_width(100_000)

    def width(renderable: Any) -> int:
        return Measurement.get(console, unbounded, renderable).maximum

    flexible = [c for c in t.columns if c.header in elastic]
    if not flexible or width(t) <= console.width:
        return t
    natural = {id(c): max(width(x) for x in [c.header, *c.cells]) for c in flexible}
    for c in flexible:
        c.max_width = 1
    room = console.width - width(t) + len(flexible)
    # In the order given: each keeps what it needs while the ones after it keep 6 or more.
    for i, c in enumerate(flexible):
        c.max_width = max(6, min(natural[id(c)], room - 6 * (len(flexible) - i - 1)))
        room -= c.max_width
    return t


def add_row(t: Table, *cells: str | Text) -> None:
    """A row whose text is shown as it is: IDs, params and messages may hold `[...]`, which
    rich would take for markup."""
    t.add_row(*(Text(c) if isinstance(c, str) else c for c in cells))


def grid() -> Table:
    g = Table.grid(padding=(0, 2))
    g.add_column(style="bold", no_wrap=True)
    g.add_column(overflow="fold")
    return g


def panel(title: str, body: RenderableType) -> None:
    if out().is_terminal:
        show(
            Panel(
                body,
                title=Text(title, style="bold"),
                title_align="left",
                box=box.ROUNDED,
                expand=False,
            )
        )
    else:
        show(Text(title, style="bold"), body)


def section(title: str, body: RenderableType | None, empty: str) -> None:
    show(
        Text(""),
        Text(title, style="bold"),
        body if body is not None else Text(f"  {empty}", style="dim"),
    )


# -- records --------------------------------------------------------------------------------


def _waiting(r: dict[str, Any]) -> str:
    """`, waiting for a concurrency slot` after the status of an execution a claim passed
    over (its workflow's `concurrency` limit is reached), `, waiting: script broken (...)` or
    `, waiting: script missing` after one whose script cannot run."""
    why = r.get("waiting_for")
    if not why:
        return ""
    return f", waiting: {why}" if why.startswith("script") else f", waiting for {why}"


def record_rows(g: Table, r: dict[str, Any]) -> None:
    cancel = (
        " (cancel requested)"
        if r.get("cancel_requested") and r["status"] not in ("completed", "failed", "cancelled")
        else ""
    )
    add_row(g, "workflow", r["workflow"])
    add_row(g, "status", status(r["status"], cancel + _waiting(r)))
    o = r.get("outcome") or {}
    if o.get("status") == "completed":
        add_row(g, "result", compact(o.get("result"), 400))
    elif o.get("status") == "failed":
        add_row(g, "error", outcome(r, 400))
    add_row(g, "params", compact(r.get("params"), 400))
    if r.get("context"):
        add_row(g, "context", compact(r["context"], 400))
    add_row(g, "admitted", local_and_relative(r.get("admitted_at")))
    add_row(g, "updated", local_and_relative(r.get("updated_at")))
    add_row(g, "due", local_and_relative(r.get("due_at")) if r.get("due_at") else "no wake pending")
    add_row(g, "attempts", str(r.get("attempts", 0)))
    if r.get("lease_holder"):
        add_row(g, "lease", str(r["lease_holder"]))
    p = r.get("parent")
    if p:
        how = "detached child" if p.get("detached") else "child"
        add_row(g, "parent", f"{p.get('execution_id')} ({how}, step {p.get('step_key')})")
    if r.get("retry_of"):
        add_row(g, "retry of", str(r["retry_of"]))
    if r.get("retries"):  # describe: every retry, oldest first
        add_row(g, "retries", ", ".join(r["retries"]))
    elif r.get("retried_by"):
        add_row(g, "retried by", str(r["retried_by"]))
    if r.get("tags"):
        add_row(g, "tags", tags_text(r["tags"]))


def show_record(r: dict[str, Any]) -> None:
    g = grid()
    record_rows(g, r)
    panel(r["execution_id"], g)


def tags_text(tags: dict[str, str] | None) -> str:
    """`k=v k2=v2`, in key order; a dash for none."""
    return " ".join(f"{k}={v}" for k, v in sorted((tags or {}).items())) or DASH


def executions(records: list[dict[str, Any]], ps: bool = False, wide: bool = False) -> None:
    if wide:
        t = table(
            "ID",
            "WORKFLOW",
            "STATUS",
            "ADMITTED",
            "ATTEMPTS",
            "PARENT",
            "RETRY OF",
            "TAGS",
            "OUTCOME",
        )
        for r in records:
            parent = (r.get("parent") or {}).get("execution_id")
            add_row(
                t,
                ident(r["execution_id"]),
                r["workflow"],
                status(r["status"]),
                relative(r.get("admitted_at")),
                str(r.get("attempts", 0)),
                ident(parent) if parent else DASH,
                ident(r["retry_of"]) if r.get("retry_of") else DASH,
                tags_text(r.get("tags")),
                outcome(r, 50),
            )
        show(fit(t, "ID", "TAGS", "OUTCOME"))
        return
    if ps:
        t = table("ID", "WORKFLOW", "STATUS", "DUE", "ATTEMPT", "LEASE", "ADMITTED")
        for r in records:
            add_row(
                t,
                ident(r["execution_id"]),
                r["workflow"],
                status(r["status"], _waiting(r)),
                relative(r.get("due_at")),
                str(r.get("attempts", 0)),
                r.get("lease_holder") or DASH,
                relative(r.get("admitted_at")),
            )
    else:
        t = table("ID", "WORKFLOW", "STATUS", "ADMITTED", "UPDATED", "ATTEMPTS", "OUTCOME")
        for r in records:
            add_row(
                t,
                ident(r["execution_id"]),
                r["workflow"],
                status(r["status"]),
                relative(r.get("admitted_at")),
                relative(r.get("updated_at")),
                str(r.get("attempts", 0)),
                outcome(r, 50),
            )
    show(fit(t, "ID", "OUTCOME"))


def event_line(e: dict[str, Any]) -> Text:
    line = Text()
    line.append(f"{e['seq']:>4}  ", style="dim")
    line.append(local(e.get("at"), ms=True) + "  ")
    line.append(f"{e['kind']:<16}", style=EVENT_STYLE.get(e["kind"], "bold"))
    if e.get("data"):
        room = out().width - 48 if out().is_terminal else 200
        line.append(" " + compact(e["data"], max(20, room)))
    return line


def finished(record: dict[str, Any]) -> Text:
    """`ID completed in 0.4s` or `ID failed: ValueError: boom`, for `trigger --wait`."""
    line = Text(f"{record['execution_id']} ")
    line.append(record["status"], style=STATUS_STYLE.get(record["status"], ""))
    if record["status"] == "completed":
        a, b = when(record.get("admitted_at")), when(record.get("updated_at"))
        if a and b:
            line.append(f" in {format_duration((b - a).total_seconds())}")
    elif record["status"] == "failed":
        line.append(": ")
        line.append_text(outcome(record, 300))
    return line
