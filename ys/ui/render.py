"""Jinja2 for the dashboard: the environment (autoescaped, templates from the package) and the
filters the templates use. Imported at the first page, never by the CLI.

Times arrive as the API gives them (ISO 8601 UTC). A time is shown exactly, in local time
(the browser runs on the daemon's machine), with UTC in its tooltip; ys.js adds the relative
form ("3m ago", "in 5s") and keeps it current, so a page's HTML only changes when its data
does, which is what its long poll compares.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup, escape

from ys.durations import format_duration

TEMPLATES = Path(__file__).parent / "templates"
MACROS = ("status", "xid", "empty", "outcome", "wait", "confirm_form")


def _parse(value: str | float | None) -> dt.datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return dt.datetime.fromtimestamp(value, tz=dt.UTC)
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def when(value: str | float | None, rel: str = "ago") -> Markup:
    """A <time>: exact local time, its UTC form as a tooltip, a relative form from ys.js.
    `rel` is "ago"/"in" (relative to now), "elapsed" (time since) or "left" (time until)."""
    d = _parse(value)
    if d is None:
        return Markup('<span class="none">–</span>')
    local = d.astimezone()
    today = dt.datetime.now().astimezone().date()
    shown = (
        local.strftime("%H:%M:%S") if local.date() == today else local.strftime("%Y-%m-%d %H:%M")
    )
    utc = d.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    full = local.strftime("%Y-%m-%d %H:%M:%S %Z")
    iso = d.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"
    return Markup(
        f'<time datetime="{iso}" data-rel="{escape(rel)}" title="{escape(full)} · {utc}">'
        f'<span class="rel"></span><span class="abs">{escape(shown)}</span></time>'
    )


def local_and_utc(value: str | float | None) -> Markup:
    """A time written out twice: local (with its zone) and UTC (for schedules)."""
    d = _parse(value)
    if d is None:
        return Markup('<span class="none">–</span>')
    local = d.astimezone()
    shown = local.strftime("%a %Y-%m-%d %H:%M %Z")
    if local.utcoffset():
        shown += d.astimezone(dt.UTC).strftime(" · %H:%M UTC")
    iso = d.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return Markup(
        f'<time datetime="{iso}" data-rel="in"><span class="rel"></span></time>'
        f'<span class="both">{escape(shown)}</span>'
    )


def seconds_between(start: str | None, end: str | None) -> float | None:
    a, b = _parse(start), _parse(end)
    if a is None or b is None:
        return None
    return (b - a).total_seconds()


def duration(seconds: float | None) -> str:
    return "–" if seconds is None else format_duration(seconds)


def size(n: int | None) -> str:
    if n is None:
        return "–"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def seg(text: str) -> str:
    """An ID as one URL path segment (every ID is encoded in a path: docs/design.md, "Wire formats")."""
    return quote(str(text), safe="")


def xlink(execution_id: str) -> str:
    """An execution's page."""
    return "/ui/executions/" + seg(execution_id)


def error_text(error: Any) -> str:
    if isinstance(error, dict) and isinstance(error.get("error"), dict):
        error = error["error"]  # a shell step's failed attempt: {"error", "status", "stdout"}
    if isinstance(error, dict):
        name, message = error.get("name") or "Error", error.get("message") or ""
        return f"{name}: {message}" if message else str(name)
    return "" if error is None else str(error)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        when=when,
        local_and_utc=local_and_utc,
        duration=duration,
        size=size,
        pretty=pretty,
        seg=seg,
        error_text=error_text,
    )
    from ys.ui import charts

    env.globals.update(seconds_between=seconds_between, charts=charts, xlink=xlink)
    # The macros are globals, not imports: a page's live region is rendered as a block on
    # its own, which does not run the template's top-level imports.
    macros = env.get_template("_macros.html").make_module()
    env.globals.update({name: getattr(macros, name) for name in MACROS})
    return env
