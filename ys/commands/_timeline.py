"""`ys describe ID --timeline`: the execution's timeline (GET /v1/executions/{id}/timeline) as
rich bars, one row per delivery, step attempt and child, for people without a browser.

Solid bars ran (green completed, red failed, yellow a retried delivery, cyan still running);
light shade waited (a sleep, a child, a value); medium shade is a retry's backoff; a ┆ column
is an idle stretch compressed on the axis (its length in the legend)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from ys.commands import _render as r
from ys.durations import format_duration

OUTCOME_STYLE = {
    "completed": "green",
    "failed": "red",
    "retry": "yellow",
    "cancelled": "yellow",
    "suspended": "blue",
    "running": "cyan",
    "waiting": "magenta",
    "backoff": "yellow",
}
GLYPH = {"run": "█", "wait": "░", "backoff": "▒"}
LABEL_WIDTH = 32


def bar_line(row: dict[str, Any], breaks: list[dict[str, Any]], width: int) -> Text:
    """One row's bars on `width` cells (pure: what the tests read)."""
    cells: list[tuple[str, str]] = [(" ", "")] * width
    for b in breaks:
        for i in range(int(b["x0"] * width), min(width, max(int(b["x1"] * width), 1))):
            cells[i] = ("┆", "dim")
    for b in row["bars"]:
        lo = min(int(b["x0"] * width), width - 1)
        hi = max(lo + 1, min(width, round(b["x1"] * width)))
        for i in range(lo, hi):
            cells[i] = (GLYPH.get(b["kind"], "█"), OUTCOME_STYLE.get(b["outcome"], ""))
    text = Text()
    for ch, style in cells:
        text.append(ch, style=style)
    return text


def _detail(row: dict[str, Any]) -> str:
    parts = []
    for b in row["bars"]:
        what = b["outcome"] if b["kind"] != "backoff" else "backoff"
        part = f"{what} {format_duration(b['seconds'])}"
        if b.get("error"):
            part += f": {r.cut(b['error'], 60)}"
        parts.append(part)
    return ", ".join(parts)


def show(t: dict[str, Any]) -> None:
    width = max(20, min(80, r.out().width - LABEL_WIDTH - 40))
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("row", no_wrap=True, max_width=LABEL_WIDTH)
    table.add_column("bars", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for row in t["rows"]:
        label = row["label"] if row["kind"] != "child" else f"↳ {row['label']}"
        style = "dim" if row["kind"] == "delivery" else ""
        table.add_row(
            Text(r.cut(label, LABEL_WIDTH), style=style),
            bar_line(row, t["breaks"], width),
            _detail(row),
        )
    first, last = r.local(t["start"], ms=True), r.local(t["end"], ms=True)
    r.panel(f"{t['execution_id']} timeline", table)
    legend = f"{first} → {last}"
    for b in t["breaks"]:
        legend += f"; ┆ {format_duration(b['seconds'])} idle compressed"
    if t.get("rows_left"):
        legend += f"; {t['rows_left']} more rows not drawn"
    r.note(legend + "; █ ran, ░ waited, ▒ retry backoff")
