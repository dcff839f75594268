"""`ys top`: the dashboard's Now page in the terminal, redrawn each second (rich Live) from
`GET /v1/overview`, until q (or Ctrl-C). Off a terminal it prints one frame and exits."""

from __future__ import annotations

import datetime as dt
import os
import select
import sys
import time
from typing import Any

import typer

from ys.commands._opts import Json, add
from ys.commands._output import client, emit_json
from ys.errors import YsError

REFRESH = 1.0


def _since(iso: str | None, now: float) -> str:
    from ys.durations import format_duration

    if not iso:
        return "-"
    return format_duration(now - dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


def _until(iso: str | None, now: float) -> str:
    from ys.durations import format_duration

    if not iso:
        return "-"
    left = dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() - now
    return "now" if left <= 0 else f"in {format_duration(left)}"


def view(
    o: dict[str, Any] | None,
    problem: str | None = None,
    now: float | None = None,
    expand: bool = True,
) -> Any:
    """One frame: the daemon's health, then running, due, waiting, failed and late slots."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from ys.commands._render import STATUS_STYLE, cut

    t = time.time() if now is None else now
    if o is None:
        return Text(f"ys top: {problem or 'no answer yet'}  (q quits)", style="red")
    dm = o["daemon"]
    head = Text.assemble(
        ("ys top", "bold"),
        f"  {dm['version']}  pid {dm['pid']}  up {_since(dm['started_at'], t)}",
        f"  running {o['counts']['running']}/{dm['concurrency']}",
        f"  admitted {o['counts']['admitted']}  suspended {o['counts']['suspended']}",
        f"  db {dm['database']['bytes'] / 1048576:.1f} MiB",
        ("   q quits", "dim"),
    )
    if problem:
        head.append(f"  ({problem})", style="red")
    hour = (o.get("activity") or {}).get("hour") or []
    spark = Text.assemble(("last hour ", "dim"), sparkline(hour))
    spark.append(
        f"  {sum(b['started'] for b in hour)} started, "
        f"{sum(b['completed'] for b in hour)} completed, "
    )
    spark.append(
        f"{sum(b['failed'] for b in hour)} failed",
        style="red" if any(b["failed"] for b in hour) else "",
    )

    def table(title: str, *cols: str) -> Table:
        tb = Table(
            title=title,
            title_justify="left",
            title_style="bold",
            box=box.SIMPLE_HEAD,
            expand=expand,
            pad_edge=False,
            show_edge=False,
        )
        for c in cols:
            tb.add_column(
                c,
                justify="right" if c in ("ATTEMPT", "PID") else "left",
                no_wrap=c in ("ELAPSED", "LEASE", "DUE", "FAILED"),
            )
        return tb

    running = table(
        f"Running ({len(o['running'])})",
        "EXECUTION",
        "WORKFLOW",
        "ELAPSED",
        "ATTEMPT",
        "LEASE",
        "PID",
    )
    for r in o["running"]:
        running.add_row(
            cut(r["execution_id"], 48),
            r["workflow"],
            _since(r["claimed_at"], t),
            str(r["attempts"]),
            _until(r["lease_expires_at"], t).replace("in ", ""),
            str(r["pid"] or "-"),
        )
    due = table(f"Due ({len(o['due'])})", "EXECUTION", "WORKFLOW", "STATUS", "DUE")
    for r in o["due"]:
        due.add_row(
            cut(r["execution_id"], 48),
            r["workflow"],
            Text(r["status"], style=STATUS_STYLE.get(r["status"], "")).append(
                f", waiting: {r['waiting_for']}" if r.get("waiting_for") else "", style="yellow"
            ),
            _until(r["due_at"], t),
        )
    waiting = table(f"Waiting ({len(o['waiting'])})", "EXECUTION", "WORKFLOW", "WAITS ON")
    for r in o["waiting"]:
        on = ", ".join(w.get("key") or w.get("effect_id") or w["kind"] for w in r["waiting_on"])
        if r.get("waiting_for"):
            on = f"waiting: {r['waiting_for']}"
        waiting.add_row(
            cut(r["execution_id"], 48),
            r["workflow"],
            cut(on or (f"timer {_until(r['due_at'], t)}" if r["due_at"] else "-"), 60),
        )
    failed = table(
        f"Failed, 24 h ({len(o['failures'])})", "EXECUTION", "WORKFLOW", "ERROR", "FAILED"
    )
    for r in o["failures"]:
        err = (r.get("outcome") or {}).get("error") or {}
        failed.add_row(
            cut(r["execution_id"], 48),
            r["workflow"],
            Text(cut(f"{err.get('name', '')}: {err.get('message', '')}", 70), style="red"),
            f"{_since(r['updated_at'], t)} ago",
        )
    parts: list[Any] = [head, spark, running, due, waiting, failed]
    if o["slots"]:
        slots = table(
            f"Schedule slots late or skipped, 24 h ({len(o['slots'])})",
            "SCHEDULE",
            "SLOT",
            "WHAT",
            "WHY",
        )
        for s in o["slots"]:
            slots.add_row(
                s["name"], s["slot"][:16].replace("T", " "), s["outcome"], cut(s["why"] or "", 80)
            )
        parts.append(slots)
    return Group(*parts)


BLOCKS = " ▁▂▃▄▅▆▇█"


def sparkline(buckets: list[dict[str, Any]]) -> Any:
    """One cell per bucket: its height the executions started, red where some failed."""
    from rich.text import Text

    top = max([b["started"] for b in buckets] + [1])
    out = Text()
    for b in buckets:
        level = 0 if not b["started"] else max(1, round(8 * b["started"] / top))
        out.append(
            BLOCKS[level] if level or not b["failed"] else "▁",
            style="red" if b["failed"] else "cyan",
        )
    return out


def _keys_pressed(timeout: float) -> str:
    """What was typed within `timeout` seconds ("" if nothing); stdin must be in cbreak mode."""
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    return os.read(sys.stdin.fileno(), 64).decode(errors="replace") if ready else ""


def _live(c: Any) -> None:
    import termios
    import tty

    from rich.live import Live

    from ys.commands._render import out

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    o: dict[str, Any] | None = None
    try:
        with Live(view(None), console=out(), screen=True, auto_refresh=False) as live:
            while True:
                problem = None
                try:
                    o = c.overview()
                except YsError as exc:
                    problem = exc.message
                live.update(view(o, problem), refresh=True)
                deadline = time.monotonic() + REFRESH
                while (left := deadline - time.monotonic()) > 0:
                    if "q" in _keys_pressed(left).lower():
                        return
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def top(json_: Json = False) -> None:
    """Watch what runs, what is due, what waits and what failed lately, live; q quits.

    Redrawn each second from the daemon's overview (the dashboard's Now page). When stdout or
    stdin is not a terminal it prints one frame and exits. With --json: the overview, once.
    """
    with client() as c:
        if json_:
            emit_json(c.overview())
            return
        if not (sys.stdout.isatty() and sys.stdin.isatty()):
            from ys.commands._render import show

            show(view(c.overview(), expand=False))
            return
        try:
            _live(c)
        except KeyboardInterrupt:
            pass


def register(app: typer.Typer) -> None:
    add(app, "top", top)
