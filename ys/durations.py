"""Durations on the command line (docs/design.md, "Wire formats"): `90`, `90s`, `10m`, `2h`, `1d`, `1.5h`.

Standard library only; bad input is INVALID_ARGUMENT (exit 2), naming the forms that work.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time

from ys.errors import InvalidArgument

# Every time ys stores is epoch seconds within the years 1970..9999 (ys.contract.check_time):
# what an ISO 8601 time in JSON can say, and what Python's datetime can render.
MIN_TIME = 0.0
MAX_TIME = 253402300799.999  # 9999-12-31T23:59:59.999Z

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)")


def parse_duration(text: str, what: str = "duration", bare: float = 1.0) -> float:
    """Seconds in `text`; a bare number is seconds (or `bare` seconds each: a number of days
    where a setting counts days)."""
    m = _DURATION.fullmatch(text.strip())
    seconds = float(m.group(1)) * (_UNITS[m.group(2)] if m.group(2) else bare) if m else math.nan
    if not math.isfinite(seconds):
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"{what} {text!r} is not a duration; use seconds or a unit: 90, 90s, 10m, 2h, 1d",
        )
    if seconds > MAX_TIME:
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"{what} {text!r} is longer than ys can count (times end in 9999)"
        )
    return seconds


def format_duration(seconds: float) -> str:
    """A short human duration: `0.4s`, `45s`, `3m`, `2h 5m`, `3d 4h`."""
    s = abs(seconds)
    if s < 10:
        return f"{s:.1f}s"
    if s < 60:
        return f"{s:.0f}s"
    minutes, secs = divmod(int(s), 60)
    if minutes < 60:
        return f"{minutes}m" + (f" {secs}s" if minutes < 10 and secs else "")
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h" + (f" {minutes}m" if minutes else "")
    days, hours = divmod(hours, 24)
    return f"{days}d" + (f" {hours}h" if hours else "")


def relative(iso: str | None, now: float | None = None) -> str:
    """An ISO 8601 time as `3m ago`, `in 5m` or `now`; `-` for none."""
    if not iso:
        return "-"
    delta = dt.datetime.fromisoformat(iso).timestamp() - (time.time() if now is None else now)
    if abs(delta) < 1:
        return "just now"
    return f"in {format_duration(delta)}" if delta > 0 else f"{format_duration(delta)} ago"
