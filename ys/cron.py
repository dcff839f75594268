"""Cron schedules: which slots are due, pure and with the clock passed in.

Parsing and DST follow cronsim (Debian cron's rules: on fall-back a fixed-time job runs once;
on spring-forward a job inside the skipped hour runs right after the jump). Slots missed while
the machine slept are handled by the schedule's catch-up policy, once, after the jump:

    once  fire the latest missed slot (what launchd and systemd Persistent=true do)
    all   fire every missed slot (each is its own execution, so none is doubled)
    skip  fire none (what cron does)

and `max_late` drops missed slots older than that. A slot is "missed" when the scheduler sees it
more than GRACE seconds late; otherwise it fires on time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

GRACE = 90.0  # seconds late before a slot counts as missed (a catch-up)
MAX_SLOTS = 10_000  # never walk more slots than this in one plan
CATCH_UP = ("once", "all", "skip")
OVERLAP = ("skip", "queue", "allow")


@dataclass(frozen=True)
class Fire:
    slot: float  # the cron slot, epoch seconds (the execution's identity)
    catch_up: bool


def local_zone_name() -> str:
    """The IANA name of the machine's zone: TZ, else /etc/localtime's target, else UTC."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz:
        return tz
    try:
        target = Path("/etc/localtime").resolve()
        parts = target.parts
        if "zoneinfo" in parts:
            return "/".join(parts[parts.index("zoneinfo") + 1:])
    except OSError:
        pass
    return "UTC"


def zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(local_zone_name() if not name or name == "local" else name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}; use an IANA name like Europe/Paris") from None


def validate(expr: str, tz: str | None = None) -> None:
    """Raise ValueError with a readable message for a bad expression or zone."""
    from cronsim import CronSim, CronSimError

    z = zone(tz)
    try:
        CronSim(expr, dt.datetime(2000, 1, 1, tzinfo=z))
    except CronSimError as exc:
        raise ValueError(f"bad cron expression {expr!r}: {exc}") from None


def slots_after(expr: str, tz: str | None, after: float, limit: int) -> list[float]:
    """The next `limit` slots strictly after `after` (epoch seconds)."""
    from cronsim import CronSim

    z = zone(tz)
    start = dt.datetime.fromtimestamp(after, tz=z)
    it = CronSim(expr, start)
    out: list[float] = []
    for d in it:
        t = d.timestamp()
        if t > after:
            out.append(t)
            if len(out) >= limit:
                break
    return out


def jitter_offset(name: str, jitter: float) -> float:
    """A deterministic delay in [0, jitter) per schedule, so a fleet does not fire at once."""
    if jitter <= 0:
        return 0.0
    h = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return (h % 1_000_000) / 1_000_000 * jitter


def plan(expr: str, tz: str | None, cursor: float, now: float, *, catch_up: str = "once",
         max_late: float | None = None, jitter: float = 0.0, name: str = "") -> tuple[
             list[Fire], float]:
    """The fires due at `now` for slots after `cursor`, and the cursor to keep afterwards.

    Slots become due at slot + jitter. On-time slots fire; missed ones follow `catch_up` and
    `max_late`. The returned cursor is the last slot considered, so nothing is planned twice.
    """
    offset = jitter_offset(name, jitter)
    due: list[float] = []
    t = cursor
    while len(due) < MAX_SLOTS:
        nxt = slots_after(expr, tz, t, 1)
        if not nxt or nxt[0] + offset > now:
            break
        due.append(nxt[0])
        t = nxt[0]
    if not due:
        return [], cursor
    if len(due) >= MAX_SLOTS:  # a very long sleep with a very frequent schedule
        due = due[-MAX_SLOTS:]
    on_time = [s for s in due if now - (s + offset) <= GRACE]
    missed = [s for s in due if now - (s + offset) > GRACE]
    if max_late is not None:
        missed = [s for s in missed if now - (s + offset) <= max_late]
    if catch_up == "skip":
        missed = []
    elif catch_up == "once":
        missed = missed[-1:]
    fires = [Fire(s, True) for s in missed] + [Fire(s, False) for s in on_time]
    return fires, due[-1]


def next_fire(expr: str, tz: str | None, cursor: float, jitter: float = 0.0,
              name: str = "") -> float | None:
    nxt = slots_after(expr, tz, cursor, 1)
    return nxt[0] + jitter_offset(name, jitter) if nxt else None
