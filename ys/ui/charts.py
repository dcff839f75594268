"""The dashboard's pictures, drawn here as SVG from the store's reads (no chart library):
an execution's timeline, a day of activity, how long deliveries took, a schedule's recent
slots.

Each picture is one <svg> whose shapes carry classes, never colours: ys.css colours them for
the light and the dark theme. Horizontal positions are percentages of the drawing's width, so
a picture fits a phone and a wide window alike; each bar holds its exact times (and error) in
a <title> and a `data-tip` that ys.js shows on hover and on keyboard focus. Every picture comes
with its numbers as a table behind a disclosure, for screen readers and for copying.
"""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup, escape

from ys.daemon.shapes import BarJson, BucketJson, HourJson, SlotHistoryJson, TimelineJson
from ys.durations import format_duration

ROW = 22  # px per row
BAR = 14
AXIS = 22  # px above the rows for the axis' labels
LABEL_SHARE = 30  # % of the width the timeline's labels take


def _pct(x: float) -> str:
    return f"{x * 100:.3f}%"


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _bar_tip(label: str, b: BarJson) -> str:
    what = "backoff before the next attempt" if b["kind"] == "backoff" else b["outcome"]
    if b["kind"] == "wait" and b["outcome"] != "failed":
        what = "waited" + (" (still)" if b["open"] else "")
    tip = f"{label}: {what}, {format_duration(b['seconds'])}, {b['start']} → {b['end']}"
    if b["open"]:
        tip += " (now)"
    if b.get("wake_at"):
        tip += f", wake {b['wake_at']}"
    if b.get("error"):
        tip += f" — {b['error']}"
    return tip


def timeline(t: TimelineJson, link: Any) -> Markup:
    """An execution's timeline (`GET /v1/executions/{id}/timeline`'s shape) as SVG; `link`
    turns an execution ID into its page's URL."""
    rows = t["rows"]
    height = AXIS + ROW * max(len(rows), 1) + 4
    out = [
        f'<svg class="chart tl" role="img" aria-labelledby="tl-title" width="100%" '
        f'height="{height}" data-rows="{len(rows)}">',
        f'<title id="tl-title">Timeline of {escape(t["execution_id"])}: {len(rows)} rows, '
        f"{len(t['breaks'])} idle stretches compressed</title>",
        '<defs><pattern id="tl-hatch" patternUnits="userSpaceOnUse" width="6" height="6" '
        'patternTransform="rotate(45)"><rect class="hatch-bg" width="6" height="6"/>'
        '<line class="hatch-line" x1="0" y1="0" x2="0" y2="6"/></pattern></defs>',
        f'<text class="axis" x="{LABEL_SHARE}%" y="14">{escape(t["start"] or "")}</text>',
        f'<text class="axis end" x="100%" y="14" text-anchor="end">{escape(t["end"] or "")}</text>',
        f'<svg class="plot" x="{LABEL_SHARE}%" y="0" width="{100 - LABEL_SHARE}%" '
        f'height="{height}" overflow="visible">',
    ]
    for b in t["breaks"]:
        out.append(
            f'<g class="break" data-tip="idle {escape(format_duration(b["seconds"]))} '
            f'compressed: {escape(b["start"])} → {escape(b["end"])}" tabindex="0">'
            f"<title>idle {escape(format_duration(b['seconds']))}, compressed</title>"
            f'<rect x="{_pct(b["x0"])}" y="{AXIS - 4}" width="{_pct(b["x1"] - b["x0"])}" '
            f'height="{height - AXIS + 4}"/>'
            f'<text x="{_pct((b["x0"] + b["x1"]) / 2)}" y="{AXIS - 6}" text-anchor="middle">'
            f"≈{escape(format_duration(b['seconds']))}</text></g>"
        )
    for i, r in enumerate(rows):
        y = AXIS + i * ROW + (ROW - BAR) / 2
        for b in r["bars"]:
            tip = _bar_tip(r["label"], b)
            cls = f"bar k-{b['kind']} o-{b['outcome']}" + (" open" if b["open"] else "")
            out.append(
                f'<g class="{cls}" tabindex="0" data-tip="{escape(tip)}"><title>{escape(tip)}'
                f'</title><rect x="{_pct(b["x0"])}" y="{y}" width="{_pct(b["x1"] - b["x0"])}" '
                f'height="{BAR}" rx="2"/></g>'
            )
    out.append("</svg>")
    for i, r in enumerate(rows):
        y = AXIS + i * ROW + ROW / 2 + 4
        label = escape(_short(r["label"], 26))
        cls = f"label r-{r['kind']}"
        text = (
            f"<g><title>{escape(r['label'])}</title>"
            f'<text class="{cls}" x="0" y="{y}">{label}</text></g>'
        )
        if r.get("link"):
            text = f'<a href="{escape(link(r["link"]))}">{text}</a>'
        out.append(text)
    out.append("</svg>")
    return Markup("".join(out))


def activity(buckets: list[BucketJson], label: str, width_hint: int = 144) -> Markup:
    """Executions started, completed and failed per bucket, as columns (failed stacked on top
    of completed; started as a line of ticks)."""
    n = max(len(buckets), 1)
    top = max([max(b["started"], b["completed"] + b["failed"]) for b in buckets] + [1])
    h, plot = 90, 76
    out = [
        f'<svg class="chart day" role="img" aria-label="{escape(label)}" width="100%" '
        f'height="{h}" preserveAspectRatio="none" data-buckets="{len(buckets)}">',
        f'<text class="axis" x="0" y="10">{top}</text>',
        f'<line class="grid" x1="0" x2="100%" y1="{h - 1}" y2="{h - 1}"/>',
    ]
    w = 100 / n
    for i, b in enumerate(buckets):
        x = i * w
        done_h = plot * b["completed"] / top
        fail_h = plot * b["failed"] / top
        tip = (
            f"{b['start']}: {b['started']} started, {b['completed']} completed, "
            f"{b['failed']} failed"
        )
        parts = [f"<title>{escape(tip)}</title>"]
        if b["completed"]:
            parts.append(
                f'<rect class="o-completed" x="{x:.3f}%" y="{h - done_h:.1f}" '
                f'width="{w * 0.8:.3f}%" height="{done_h:.1f}"/>'
            )
        if b["failed"]:
            parts.append(
                f'<rect class="o-failed" x="{x:.3f}%" y="{h - done_h - fail_h:.1f}" '
                f'width="{w * 0.8:.3f}%" height="{fail_h:.1f}"/>'
            )
        if b["started"]:
            ys = h - plot * b["started"] / top
            parts.append(
                f'<rect class="started" x="{x:.3f}%" y="{ys:.1f}" width="{w * 0.8:.3f}%" '
                'height="2"/>'
            )
        cls = "bucket" + (" has-failed" if b["failed"] else "")
        out.append(f'<g class="{cls}" tabindex="-1" data-tip="{escape(tip)}">{"".join(parts)}</g>')
    out.append("</svg>")
    return Markup("".join(out))


def took(seconds: float | None) -> str:
    """A delivery's duration, milliseconds below a second: `12 ms`, `1.5s`, `3m`."""
    if seconds is None:
        return "–"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else format_duration(seconds)


def durations(hours: list[HourJson], label: str) -> Markup:
    """How long deliveries took per hour: the p95 as a pale column with the p50 inside it, on
    a log scale (a delivery takes milliseconds or hours), the scale's ends on the left."""
    values = [v for h in hours for v in (h["p50"], h["p95"]) if v]
    hi = max(values, default=1.0)
    lo = min(min(values, default=0.001) / 2, hi / 10)  # the least still shows; a decade tall
    span = math.log10(hi) - math.log10(lo)
    h, plot = 90, 76

    def height(v: float) -> float:
        return max(2.0, plot * (math.log10(v) - math.log10(lo)) / span)

    n = max(len(hours), 1)
    w = 100 / n
    out = [
        f'<svg class="chart durations" role="img" aria-label="{escape(label)}" width="100%" '
        f'height="{h}" data-hours="{len(hours)}">',
        f'<text class="axis" x="0" y="10">{escape(took(hi))}</text>',
        f'<text class="axis" x="0" y="{h - 4}">{escape(took(lo))}</text>',
        f'<line class="grid" x1="0" x2="100%" y1="{h - 1}" y2="{h - 1}"/>',
    ]
    for i, b in enumerate(hours):
        if not b["count"] or b["p50"] is None or b["p95"] is None:  # an hour without deliveries
            continue
        x = i * w + w * 0.1
        tip = f"{b['start']}: {b['count']} deliveries, p50 {took(b['p50'])}, p95 {took(b['p95'])}"
        p95, p50 = height(b["p95"]), height(b["p50"])
        out.append(
            f'<g class="hour" tabindex="-1" data-tip="{escape(tip)}"><title>{escape(tip)}</title>'
            f'<rect class="p95" x="{x:.3f}%" y="{h - p95:.1f}" width="{w * 0.8:.3f}%" '
            f'height="{p95:.1f}"/><rect class="p50" x="{x + w * 0.2:.3f}%" y="{h - p50:.1f}" '
            f'width="{w * 0.4:.3f}%" height="{p50:.1f}"/></g>'
        )
    out.append("</svg>")
    return Markup("".join(out))


def sparkline(values: list[int], label: str) -> Markup:
    """A small line of counts (a workflow's day, on the Workflows page)."""
    n = max(len(values), 1)
    top = max([*values, 1])
    w = 100 / n
    out = [
        f'<svg class="chart spark" role="img" aria-label="{escape(label)}" width="100%" '
        'height="22">'
    ]
    for i, v in enumerate(values):
        if v:
            hh = 20 * v / top
            out.append(
                f'<rect x="{i * w:.3f}%" y="{22 - hh:.1f}" width="{w:.3f}%" height="{hh:.1f}"/>'
            )
    out.append("</svg>")
    return Markup("".join(out))


def slots(items: list[SlotHistoryJson], label: str) -> Markup:
    """A schedule's recent slots, oldest first: one mark each, coloured on time, late,
    skipped, missed, queued, or failed (it fired, and its execution failed)."""
    n = max(len(items), 1)
    w = 100 / n
    out = [
        f'<svg class="chart slots" role="img" aria-label="{escape(label)}" width="100%" '
        f'height="26" data-slots="{len(items)}">'
    ]
    for i, s in enumerate(items):
        tip = f"{s['slot']}: {s['mark']}"
        lateness = s["lateness"]
        if lateness is not None:
            tip += f", fired {format_duration(lateness)} after its time"
        if s.get("why"):
            tip += f" — {s['why']}"
        out.append(
            f'<g class="slot m-{escape(s["mark"])}" tabindex="0" data-tip="{escape(tip)}">'
            f'<title>{escape(tip)}</title><rect x="{i * w + w * 0.1:.3f}%" y="3" '
            f'width="{w * 0.8:.3f}%" height="20" rx="2"/></g>'
        )
    out.append("</svg>")
    return Markup("".join(out))
