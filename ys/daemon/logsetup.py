"""The daemon's own log: bounded in size and in repetition, private like every other file.

A daemon started in the background (`ys daemon start`, autostart, launchd) has its stdout and
stderr on `<data>/daemon.log`; it then writes that file itself through a rotating handler
(`daemon_log_max_bytes`, 5 MiB, and three older files), and after each rollover points its
stdout and stderr at the new file, so that nothing (a C library, a child's traceback) keeps
writing into a rotated one. In the foreground (`ys daemon run` under systemd, a terminal) it
logs to stderr, which the service manager bounds.

Either way, warnings and errors that repeat (the same logger, level and message: one
traceback per failed accept while descriptors run out) pass a few times per minute; the rest
are counted, and the count is logged with the next one that passes.
"""

from __future__ import annotations

import io
import logging
import logging.handlers
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ys.paths import Paths

DEFAULT_MAX_BYTES = 5 * 1024 * 1024
MIN_MAX_BYTES = 1024
BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(paths: Paths, level: str = "INFO", max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Configure the root logger for the daemon (before anything logs): `level` and the
    rotated file's `max_bytes` are the `log_level` and `daemon_log_max_bytes` settings."""
    log_file = paths.daemon_log
    for f in [
        log_file,
        *(log_file.with_name(f"{log_file.name}.{n}") for n in range(1, BACKUPS + 1)),
    ]:
        try:
            os.chmod(f, 0o600)  # made by `ys daemon start` under the caller's umask
        except OSError:
            pass
    handler: logging.Handler
    if _is_stderr(log_file):
        handler = DaemonLogHandler(
            log_file, maxBytes=max(MIN_MAX_BYTES, max_bytes), backupCount=BACKUPS
        )
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(RateLimit())
    root = logging.getLogger()
    root.setLevel(level)
    root.addHandler(handler)


def _is_stderr(path: Path) -> bool:
    """Whether our stderr is this file (we were started in the background)."""
    try:
        ours, theirs = os.fstat(2), path.stat()
    except OSError:
        return False
    return (ours.st_dev, ours.st_ino) == (theirs.st_dev, theirs.st_ino)


class DaemonLogHandler(logging.handlers.RotatingFileHandler):
    """Rotates by size; every file it opens is 0600, and stdout and stderr follow it."""

    def _open(self) -> io.TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)  # noqa: SIM115

    def doRollover(self) -> None:
        super().doRollover()
        if self.stream is not None:
            for fd in (1, 2):
                os.dup2(self.stream.fileno(), fd)


@dataclass
class _Seen:
    since: float
    passed: int = 0
    held: int = 0


class RateLimit(logging.Filter):
    """Lets BURST records of one kind (logger, level, message) through per WINDOW seconds;
    counts the rest and says how many when the next of that kind passes."""

    BURST = 5
    WINDOW = 60.0
    KINDS = 1000  # kinds remembered; older ones are forgotten past this

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.clock = clock
        self._seen: dict[tuple[str, int, str], _Seen] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, record.getMessage())
        now = self.clock()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None or now - seen.since >= self.WINDOW:
                held = seen.held if seen is not None else 0
                if seen is None and len(self._seen) >= self.KINDS:
                    self._forget(now)
                seen = self._seen[key] = _Seen(now)
                if held:
                    _append(
                        record,
                        f" [{held} more like this were not logged in the "
                        f"{self.WINDOW:.0f} s before]",
                    )
            if seen.passed >= self.BURST:
                seen.held += 1
                return False
            seen.passed += 1
            if seen.passed == self.BURST:
                _append(
                    record,
                    f" [repeated {self.BURST} times: more like this are counted, "
                    f"not logged, for {self.WINDOW:.0f} s]",
                )
            return True

    def _forget(self, now: float) -> None:
        for key in [k for k, s in self._seen.items() if now - s.since >= self.WINDOW]:
            del self._seen[key]
        if len(self._seen) >= self.KINDS:
            self._seen.clear()


def _append(record: logging.LogRecord, note: str) -> None:
    record.msg = record.getMessage() + note
    record.args = None
