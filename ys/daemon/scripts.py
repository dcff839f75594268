"""What the registry reads from one script: its import check (Python), its `# ys:` header
(shell), the schedule it declares, and a cheap signature of its file and folder.

Nothing here lets a script's problem escape as an exception: each returns the problem as text,
which becomes that script's load error (`ys workflows`). Nothing here opens anything but a
regular file, and never on the event loop: a FIFO in the folder would block the read forever.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from ys import runenv
from ys.paths import WORKFLOW_UMASK
from ys.values import UserJson, UserObject

HEADER = "# ys:"
HEADER_LINES = 20  # the header must be near the top

Signature = tuple[Any, ...]
FLAGS = ("pin",)  # header options written without a value


# What a script declares beside its schedule (docs/design.md, "Workflow options"), the same for Python and shell.
OPTIONS = (
    "timeout",
    "max_attempts",
    "concurrency",
    "key",
    "on_failure",
    "pin",
    "umask",
    "cwd",
    "env_file",
    "nice",
    "memory_max",
)
DEFAULT_MAX_ATTEMPTS = 10


@dataclass(frozen=True)
class WorkflowOptions:
    """A workflow's declared options, parsed and checked (`parse_options`)."""

    timeout: float | None = None  # seconds from admission to a TimeoutError failure
    max_attempts: int = DEFAULT_MAX_ATTEMPTS  # deliveries ending without an outcome, at most
    concurrency: int | None = None  # executions running at once (per `key` value when set)
    key: str | None = None  # the params field whose value `concurrency` counts per
    on_failure: str | None = None
    pin: bool = False
    umask: int | None = None  # the worker's; None: WORKFLOW_UMASK (022)
    cwd: str | None = None  # the worker's working directory; None: the workflows folder
    env_file: str | None = None  # NAME=value lines read at each delivery (ys.runenv)
    nice: int | None = None  # 0-19
    memory_max: int | None = None  # bytes: the worker's RLIMIT_AS (ys.runenv)


# A declared value as written: a header's text (True for a bare word), or the decorator's JSON
# value (the worker's check sends what JSON cannot carry as its repr).
Declared = str | int | float | bool
# The options as a script writes them, by name: `parse_options` checks them (an unknown name
# is its error) into WorkflowOptions.
DeclaredOptions = Mapping[str, UserJson]
# What the decorator or the header declares before it is split (`parse_header`, `check_python`).
Declarations = Mapping[str, UserJson]


class NotGiven(Enum):
    """A schedule's params the script did not write: `params=None` is written (JSON null),
    and so, without a schedule, refused as params with nothing to fire them."""

    NOT_GIVEN = "not given"


NOT_GIVEN = NotGiven.NOT_GIVEN


@dataclass(frozen=True)
class DeclaredSchedule:
    """The schedule a script declares (its decorator or its `# ys: schedule=...` header), as
    written: `schedule_error` says what is wrong with it, `schedule_args` checks it into the
    arguments of the store's `schedule_add` (docs/design.md, "Workflow options")."""

    schedule: Declared | None = None  # a cron expression
    every: Declared | None = None  # an interval (`15m`), instead of a cron expression
    tz: Declared | None = None
    catch_up: Declared | None = None
    overlap: Declared | None = None
    max_late: Declared | None = None
    jitter: Declared | None = None
    # a JSON object (its text in a header): what each fire is given
    params: UserJson | NotGiven = NOT_GIVEN
    # the keys the script wrote (`split_options`), a None among them included: shown as null
    written: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @property
    def has_rule(self) -> bool:
        """Whether it says when to fire (a cron expression or an interval)."""
        return bool(self.schedule or self.every)

    def to_json(self) -> dict[str, UserJson]:
        """The schedule as declared (`ys workflows --json`): each key the script wrote, one
        written as None shown as null (as params are), the ones not written left out."""
        out: dict[str, UserJson] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name != "written" and not isinstance(v, NotGiven):
                if v is not None or f.name in self.written:
                    out[f.name] = v
        return out


SCHEDULE_KEYS = tuple(f.name for f in fields(DeclaredSchedule) if f.name != "written")


@dataclass(frozen=True)
class ScheduleArgs:
    """A declared schedule checked with the rules `ys schedule add` follows: the arguments
    the scheduler gives the store's `schedule_add`."""

    cron_expr: str
    tz: str
    catch_up: str
    overlap: str
    max_late: float | None
    jitter: float
    params: UserObject | None


def split_options(
    declared: Declarations | None,
) -> tuple[DeclaredSchedule | None, DeclaredOptions]:
    """(schedule, options) of what a script declares: its decorator's options or its header.
    Whatever is not a schedule key is an option (an unknown one is `parse_options`' error);
    the schedule part is None when nothing is left of it."""
    d = dict(declared or {})
    options = dict(d.pop("options", None) or {})
    for key in list(d):
        if key not in SCHEDULE_KEYS:
            options[key] = d.pop(key)
    return (DeclaredSchedule(**d, written=frozenset(d)) if d else None), options


def parse_options(options: DeclaredOptions) -> WorkflowOptions:
    """The declared options checked; ValueError saying which one is wrong and why."""
    unknown = sorted(k for k in options if k not in OPTIONS)
    if unknown:
        known = ", ".join(OPTIONS + SCHEDULE_KEYS)
        raise ValueError(f"unknown option {unknown[0]!r}; the options are {known}")
    timeout = _seconds(options.get("timeout"), "timeout")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"bad timeout: {options['timeout']!r} must be more than 0 seconds")
    handler = options.get("on_failure")
    if handler is not None:
        from ys.contract import check_workflow_name
        from ys.errors import YsError

        try:
            check_workflow_name(handler)
        except YsError as exc:
            raise ValueError(f"bad on_failure: {exc.message}") from None
    key = options.get("key")
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise ValueError(f"bad key: {key!r} must be the name of a params field")
    concurrency = _count(options.get("concurrency"), "concurrency")
    if key is not None and concurrency is None:
        raise ValueError("key needs concurrency: key=FIELD limits concurrency per value")
    max_attempts = _count(options.get("max_attempts"), "max_attempts")
    return WorkflowOptions(
        timeout=timeout,
        max_attempts=DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts,
        concurrency=concurrency,
        key=key,
        on_failure=handler,
        pin=is_pinned(options),
        umask=_umask(options.get("umask")),
        cwd=_given(options.get("cwd"), runenv.check_cwd),
        env_file=_given(options.get("env_file"), runenv.check_env_file),
        nice=_given(options.get("nice"), runenv.parse_nice),
        memory_max=_given(options.get("memory_max"), runenv.parse_size),
    )


def _given(v: Any, check: Any) -> Any:
    return None if v is None else check(v)


def _umask(v: Any) -> int | None:
    """Octal text (`077`, a header's or a decorator's "027") or a number (0o027), 0 to 0o777."""
    if v is None:
        return None
    if isinstance(v, str):
        text = v.strip().lower().removeprefix("0o")
        if text and all(c in "01234567" for c in text):
            v = int(text, 8)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 0o777:
        raise ValueError(f"bad umask: {v!r} must be octal digits such as 022 or 077")
    return v


def _count(v: Any, what: str) -> int | None:
    """A whole number >= 1 (an int, or its text in a header), or None when not given."""
    if v is None:
        return None
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"bad {what}: {v!r} must be a whole number of 1 or more")
    return v


def options_error(options: DeclaredOptions) -> str | None:
    """Why the declared options cannot be used, or None."""
    try:
        parse_options(options)
    except ValueError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - a YsError from a duration, say
        return f"bad option: {getattr(exc, 'message', exc)}"
    return None


def is_pinned(options: DeclaredOptions) -> bool:
    pin = options.get("pin")
    return pin is True or str(pin).lower() in ("1", "true", "yes")


async def check_python(path: Path) -> tuple[str | None, Declarations | None]:
    """Import the script in a subprocess; returns (error, schedule declared by the decorator).
    The decorator's other options (on_failure, pin) come back under the key `options`."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ys.worker",
        "--check",
        str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(path.parent),
        umask=WORKFLOW_UMASK,  # what its import writes, as a delivery would
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return "importing the script took longer than 30 s", None
    except asyncio.CancelledError:  # the daemon is stopping: leave no child behind
        if proc.returncode is None:
            proc.kill()
        raise
    try:
        info = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return f"the script could not be checked: {tail[0]}", None
    if not isinstance(info, dict):
        return "the script could not be checked: its check printed no JSON object", None
    schedule = info.get("schedule")
    declared: dict[str, UserJson] = dict(schedule) if isinstance(schedule, dict) else {}
    options = info.get("options")
    if isinstance(options, dict) and options:
        declared["options"] = options
    return info.get("error"), declared or None


def read_head(path: Path, lines: int = HEADER_LINES) -> list[str]:
    """The first lines of a regular file. Opened without blocking and checked once open, so a
    FIFO (or a device) put there in the meantime is refused instead of read. Blocking: call it
    in a thread."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        with os.fdopen(fd, encoding="utf-8", errors="replace", closefd=False) as f:
            return [f.readline() for _ in range(lines)]
    finally:
        os.close(fd)


def parse_header(head: list[str]) -> Declarations | None:
    """The options of every `# ys: schedule="..." tz=...` line (shell quoting), merged, if
    there is one. Raises ValueError for a line shlex cannot split (an unclosed quote) and for
    an option given on two lines (naming both)."""
    import shlex

    given: dict[str, Declared] = {}
    where: dict[str, int] = {}  # option -> the line that gave it
    for number, line in enumerate(head, 1):
        s = line.strip()
        if not s.startswith(HEADER):
            continue
        try:
            parts = shlex.split(s[len(HEADER) :])
        except ValueError as exc:
            raise ValueError(f"its `{HEADER}` line does not parse ({exc}): {s}") from None
        for part in parts:
            k, eq, v = part.partition("=")
            k = k.strip() if eq else part  # a bare word is a flag (pin), or an unknown option
            if k in where:
                raise ValueError(
                    f"option {k!r} is given twice, on line {where[k]} and line {number}; "
                    "give it once"
                )
            where[k] = number
            given[k] = v if eq else True
    return given or None


async def shell_header(path: Path) -> tuple[str | None, Declarations | None]:
    """(error, options) of a shell script's `# ys:` header, read off the event loop."""
    try:
        head = await asyncio.to_thread(read_head, path)
    except OSError as exc:
        return f"the script could not be read: {exc.strerror or exc}", None
    try:
        return None, parse_header(head)
    except ValueError as exc:
        return str(exc), None


def schedule_args(name: str, sch: DeclaredSchedule) -> ScheduleArgs:
    """The `schedule_add` arguments for the schedule a script declares, checked with the rules
    `ys schedule add` follows. Raises YsError or ValueError with a readable message."""
    from ys.contract import check_schedule
    from ys.cron import zone_name

    args = ScheduleArgs(
        cron_expr=_rule(sch),
        tz=zone_name(sch.tz),
        catch_up="once" if sch.catch_up is None else str(sch.catch_up),
        overlap="skip" if sch.overlap is None else str(sch.overlap),
        max_late=_seconds(sch.max_late, "max_late"),
        jitter=_seconds(sch.jitter, "jitter") or 0.0,
        params=None if isinstance(sch.params, NotGiven) else schedule_params(sch.params),
    )
    check_schedule(
        name, name, args.cron_expr, args.tz, args.catch_up, args.overlap, args.max_late, args.jitter
    )
    return args


def _rule(sch: DeclaredSchedule) -> str:
    """The declared cron expression, or `every="15m"` as an interval rule (not both)."""
    from ys.cron import every_rule

    if sch.every is None:
        return str(sch.schedule)
    if sch.schedule:
        raise ValueError("declare schedule= (cron) or every=, not both")
    return every_rule(_seconds(sch.every, "every") or 0.0)


def schedule_params(v: UserJson) -> UserObject | None:
    """The params a declared schedule fires with: a JSON object (JSON text in a header);
    ValueError saying what is wrong."""
    if v is None:
        return None
    if isinstance(v, str):
        try:
            v = json.loads(v, parse_constant=_no_constant)
        except ValueError as exc:
            raise ValueError(f"bad params: {v!r} is not JSON ({exc})") from None
    if not isinstance(v, dict):
        raise ValueError(f"bad params: {v!r} is not a JSON object; write params='{{\"k\": 1}}'")
    return v


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def schedule_error(name: str, sch: DeclaredSchedule | None) -> str | None:
    """Why the schedule a script declares cannot be used, or None."""
    from ys.errors import YsError

    if sch is not None and not isinstance(sch.params, NotGiven):
        try:
            schedule_params(sch.params)
        except ValueError as exc:
            return str(exc)
        if not sch.has_rule:
            return "bad params: params are what the script's schedule fires with; add a schedule"
    if sch is None or not sch.has_rule:
        if sch is not None and sch.tz:  # a zone without a schedule is still checked: a typo shows
            from ys.cron import zone

            try:
                zone(str(sch.tz))
            except ValueError as exc:
                return f"bad schedule: {exc}"
        return None
    try:
        schedule_args(name, sch)
    except YsError as exc:
        return f"bad schedule: {exc.message}"
    except (ValueError, TypeError) as exc:
        return f"bad schedule: {exc}"
    return None


def _seconds(v: Any, what: str) -> float | None:
    if v is None or v == "":
        return None
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise ValueError(f"bad {what}: {v!r} is not a duration (seconds, or text like 10m)")
    if isinstance(v, int | float):
        from ys.durations import MAX_TIME

        if not 0 <= v <= MAX_TIME:  # as parse_duration: times end in the year 9999
            raise ValueError(f"bad {what}: {v!r} is not a duration (seconds, or text like 10m)")
        return float(v)
    from ys.durations import parse_duration
    from ys.errors import YsError

    try:
        return parse_duration(str(v), what)
    except YsError as exc:
        raise ValueError(f"bad {what}: {exc.message}") from None


def signature(folder: Path, path: Path) -> Signature | None:
    """What changes when the file, its target or the folder changes (content, mode, owner):
    compared on every rescan, so a chmod that the watcher does not report is still seen.
    None when the name is gone."""
    try:
        st = path.lstat()
    except OSError:
        return None
    try:
        f = folder.stat()
        where: Signature = (f.st_ino, f.st_mode, f.st_uid)  # not its mtime: any new file has one
    except OSError:
        where = ("missing",)
    parts: list[Any] = [where, _stat_key(st)]
    if stat.S_ISLNK(st.st_mode):
        try:
            parts += [os.readlink(path), _stat_key(path)]
        except OSError:
            parts.append("dangling")
    return tuple(parts)


def _stat_key(p: Path | os.stat_result) -> Signature:
    try:
        st = p if isinstance(p, os.stat_result) else p.stat()
    except OSError:
        return ("missing",)
    return (st.st_ino, st.st_mode, st.st_uid, st.st_mtime_ns, st.st_size)
