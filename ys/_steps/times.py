"""The times a step asks for, checked as the store will check them (check_time: finite,
within the years 1970..9999) before anything is sent: a wake the daemon refuses would make
the step's save fail, and a failed save is retried as an infrastructure failure forever.
So a time ys cannot store is a ValueError the workflow sees, naming the call."""

from __future__ import annotations

from typing import Any

from ys.contract import check_time
from ys.errors import InvalidArgument


def wake_time(what: str, at: Any) -> float:
    """`at` (epoch seconds) as a time the store takes, or ValueError naming `what`."""
    try:
        return check_time(at, what)
    except InvalidArgument as exc:
        raise ValueError(exc.message) from None


def wake_after(what: str, now: float, seconds: Any) -> float:
    """`now + seconds` for a number of seconds >= 0, or TypeError / ValueError naming `what`."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"{what} must be a number of seconds, not {type(seconds).__name__}")
    if not seconds >= 0:  # NaN too
        raise ValueError(f"{what} must be >= 0, not {seconds!r}")
    return checked_wake(what, now, seconds)


def checked_wake(what: str, now: float, seconds: float) -> float:
    """`now + seconds` as a time the store takes, or ValueError naming `what`."""
    try:
        return check_time(now + seconds, what)
    except (InvalidArgument, OverflowError):  # OverflowError: an int past any float
        raise ValueError(
            f"{what} must end before the year 10000, not {seconds!r} s from now"
        ) from None
