"""Fault injection for crash tests, importable from every side (the SDK, the store, the
daemon) without pulling in any of them.

    YS_CRASH_POINTS="start.after_client@/tmp/marker,schedule.in_fire"

SIGKILLs the process at each named point (once per marker file, when one is given). The
SDK's steps call it through `ys.sdk.crash_point`, so a test may patch that name to raise.
"""

from __future__ import annotations

import os
import signal
import sys


def crash_point(name: str) -> None:
    """SIGKILL this process here if YS_CRASH_POINTS names this point (see the module)."""
    spec = os.environ.get("YS_CRASH_POINTS")
    if not spec:
        return
    for item in spec.split(","):
        point, _, marker = item.partition("@")
        if point.strip() != name:
            continue
        if marker:
            try:
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except FileExistsError:
                return
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
