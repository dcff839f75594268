"""Cron schedules: which slots are due, pure and with the clock passed in.

An expression is five fields, minute hour day month weekday, or one of crontab(5)'s shortcuts
(@hourly, @daily or @midnight, @weekly, @monthly, @yearly or @annually); `fields` is the one
check every expression passes (schedule add, the store, the decorator, shell headers), so a
six-field expression, which cronsim would read with a seconds field first, is refused
everywhere alike. Parsing and DST follow cronsim (Debian cron's rules: on fall-back a
fixed-time job runs once; on spring-forward a job inside the skipped hour runs right after the
jump). Slots missed while the machine slept or the daemon was down are handled by the
schedule's catch-up policy, once, after the jump:

    once  fire once, for the latest slot due (what launchd and systemd Persistent=true do)
    all   fire every missed slot (each is its own execution, so none is doubled)
    skip  fire none (what cron does)

and `max_late` drops missed slots older than that. A slot is "missed" when the scheduler sees it
more than GRACE seconds late; otherwise it fires on time. A fire that stands for missed slots
has `catch_up` set (the execution's context says so).
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
            return "/".join(parts[parts.index("zoneinfo") + 1 :])
    except OSError:
        pass
    return "UTC"


def machine_zone() -> str:
    """The zone a schedule given none is read in, by the name it is stored and shown under:
    the machine's IANA name (`local` only when that name does not load)."""
    name = local_zone_name()
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return "local"
    return name


def zone_name(tz: object) -> str:
    """A schedule's zone as stored and shown: the machine's by its IANA name when none (or
    `local`) is given, so `ys schedule add` without --tz and a script's schedule without tz
    read, show and fire alike."""
    return machine_zone() if not tz or tz == "local" else str(tz)


def zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(local_zone_name() if not name or name == "local" else name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown time zone {name!r}; use an IANA name like Europe/Paris"
        ) from None


# crontab(5)'s shortcuts, as the five fields each stands for (cronsim reads none of them).
SHORTCUTS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIVE_FIELDS = (
    'write five fields, minute hour day month weekday ("0 3 * * *" is 03:00 every '
    "day), or @hourly, @daily, @weekly, @monthly, @yearly"
)


def fields(expr: str) -> str:
    """The five cron fields `expr` stands for (a shortcut expanded); ValueError says what is
    wrong and what to write instead. Only the count is checked here; cronsim checks each field."""
    if not isinstance(expr, str):
        raise ValueError(f"bad cron expression {expr!r}: not text; {FIVE_FIELDS}")
    text = expr.strip()
    if text.startswith("@"):
        word = text.lower()
        if word == "@reboot":
            raise ValueError(
                "bad cron expression '@reboot': schedules fire at clock times; "
                "to run a workflow when the machine starts, call `ys trigger` "
                "from a boot script (a systemd unit or launchd agent)"
            )
        if word in SHORTCUTS:
            return SHORTCUTS[word]
        raise ValueError(f"bad cron expression {expr!r}: no such shortcut; {FIVE_FIELDS}")
    n = len(text.split())
    if n != 5:
        extra = " (ys has no seconds field)" if n == 6 else ""
        raise ValueError(
            f"bad cron expression {expr!r}: {n} field{'' if n == 1 else 's'}{extra}; {FIVE_FIELDS}"
        )
    return text


def validate(expr: str, tz: str | None = None) -> None:
    """Raise ValueError with a readable message for a bad expression or zone."""
    from cronsim import CronSim, CronSimError

    five = fields(expr)
    z = zone(tz)
    try:
        CronSim(five, dt.datetime(2000, 1, 1, tzinfo=z))
    except CronSimError as exc:
        raise ValueError(f"bad cron expression {expr!r}: {exc}") from None


def slots_after(expr: str, tz: str | None, after: float, limit: int) -> list[float]:
    """The next `limit` slots strictly after `after` (epoch seconds)."""
    from cronsim import CronSim

    z = zone(tz)
    start = dt.datetime.fromtimestamp(after, tz=z)
    it = CronSim(fields(expr), start)
    out: list[float] = []
    for d in it:
        t = d.timestamp()
        if t > after:
            out.append(t)
            if len(out) >= limit:
                break
    return out


def slots_between(expr: str, tz: str | None, after: float, until: float) -> list[float]:
    """The slots in (after, until], oldest first. Walked back from `until`, so after a gap of
    more than MAX_SLOTS slots the ones kept are the newest (a forward walk would keep the
    oldest, and the latest missed slot would be one from days ago)."""
    from cronsim import CronSim

    if until <= after:
        return []
    # Start one second past `until`: the first step back lands on `until` itself.
    start = dt.datetime.fromtimestamp(until + 1, tz=zone(tz))
    out: list[float] = []
    for d in CronSim(fields(expr), start, reverse=True):
        t = d.timestamp()
        if t <= after or len(out) >= MAX_SLOTS:
            break
        if t <= until:
            out.append(t)
    out.reverse()
    return out


def jitter_offset(name: str, jitter: float) -> float:
    """A deterministic delay in [0, jitter) per schedule, so a fleet does not fire at once."""
    if jitter <= 0:
        return 0.0
    h = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return (h % 1_000_000) / 1_000_000 * jitter


def plan(
    expr: str,
    tz: str | None,
    cursor: float,
    now: float,
    *,
    catch_up: str = "once",
    max_late: float | None = None,
    jitter: float = 0.0,
    name: str = "",
) -> tuple[list[Fire], float]:
    """The fires due at `now` for slots after `cursor`, and the cursor to keep afterwards.

    Slots become due at slot + jitter. On-time slots fire; missed ones follow `catch_up` and
    `max_late`. The returned cursor is the last slot considered, so nothing is planned twice.
    """
    fires, cursor, _ = plan_with_skips(
        expr, tz, cursor, now, catch_up=catch_up, max_late=max_late, jitter=jitter, name=name
    )
    return fires, cursor


def plan_with_skips(
    expr: str,
    tz: str | None,
    cursor: float,
    now: float,
    *,
    catch_up: str = "once",
    max_late: float | None = None,
    jitter: float = 0.0,
    name: str = "",
) -> tuple[list[Fire], float, list[tuple[float, str]]]:
    """`plan`, and the slots that will never fire with why: `late` (missed by more than
    `max_late`) or `catch_up_skip` (missed under catch_up=skip). Slots that catch_up=once
    folds into one run are not skipped: their run happens."""
    offset = jitter_offset(name, jitter)
    due = slots_between(expr, tz, cursor, now - offset)
    if not due:
        return [], cursor, []
    on_time = [s for s in due if now - (s + offset) <= GRACE]
    missed = [s for s in due if now - (s + offset) > GRACE]
    skipped: list[tuple[float, str]] = []
    if max_late is not None:
        skipped = [(s, "late") for s in missed if now - (s + offset) > max_late]
        missed = [s for s in missed if now - (s + offset) <= max_late]
    if catch_up == "skip":
        skipped += [(s, "catch_up_skip") for s in missed]
    if catch_up == "skip" or not missed:
        fires = [Fire(s, False) for s in on_time]
    elif catch_up == "once":
        # One run for the whole gap, for its latest slot, even one still on time: firing an
        # older missed slot as well would run twice, and under overlap=skip the older run
        # would make the latest slot be skipped.
        fires = [Fire(max(missed + on_time), True)]
    else:
        fires = [Fire(s, True) for s in missed] + [Fire(s, False) for s in on_time]
    return fires, due[-1], sorted(skipped)


def next_fire(
    expr: str, tz: str | None, cursor: float, jitter: float = 0.0, name: str = ""
) -> float | None:
    nxt = slots_after(expr, tz, cursor, 1)
    return nxt[0] + jitter_offset(name, jitter) if nxt else None
