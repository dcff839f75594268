"""Settings: `<config>/config.toml`, read with tomllib; the environment wins over it, and a
command-line option over both. The daemon reads them once, at start, and passes each value to
the part that uses it: no module under ys/daemon/ or ys/store/ reads the environment.

    database              YS_DATABASE              a PostgreSQL URL; absent: the SQLite file
    concurrency           YS_CONCURRENCY           deliveries at once, per daemon (4)
    on_failure            YS_ON_FAILURE            the folder-wide failure handler (a workflow)
    log_max_bytes         YS_LOG_MAX_BYTES         the most one delivery log keeps (10 MiB)
    otel                  YS_OTEL                  export traces (true/false; unset: the OTEL_*
                                                   variables decide, docs/design.md "Traces")
    lease_seconds         YS_LEASE_SECONDS         a delivery's lease, renewed at a third (30)
    grace_seconds         YS_GRACE_SECONDS         what running deliveries get at stop (10)
    cancel_grace_seconds  YS_CANCEL_GRACE_SECONDS  what a cancelled worker gets to reach a
                                                   step before it is killed (10)
    retry_base_seconds    YS_RETRY_BASE_SECONDS    the first retry's delay, doubled after (1)
    retention_days        YS_RETENTION_DAYS        finished executions kept this long (30)
    daemon_log_max_bytes  YS_DAEMON_LOG_MAX_BYTES  daemon.log's size before it rotates (5 MiB)
    log_level             YS_LOG_LEVEL             the daemon's log level (INFO)
    launcher              YS_LAUNCHER              warm (a fork server) or spawn (warm)
    keepalive_seconds     YS_KEEPALIVE_SECONDS     an idle API connection is closed after (75)
    read_timeout_seconds  YS_READ_TIMEOUT_SECONDS  a request must arrive within (30)
    cgroup_root           YS_CGROUP_ROOT           where cgroup v2 is mounted (/sys/fs/cgroup;
                                                   the tests point it at a fake folder)

A duration is seconds (`90`, `1.5`) or has a unit (`90s`, `10m`, `2h`, `1d`; ys.durations);
`retention_days` counts a bare number in days. A size is bytes or has a unit (`512K`, `10M`,
`10MiB`; ys.runenv.parse_size). The standard OTEL_* variables are captured too (`otel_env`).

An unknown key or a bad value is an INVALID_ARGUMENT naming where it came from: `ys doctor`
reports it and the daemon refuses to start with it. A database URL may carry a password, so
every message and every display goes through `redact`. Standard library only.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ys.errors import InvalidArgument

DEFAULT_CONCURRENCY = 4
DEFAULT_LOG_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_DAEMON_LOG_MAX_BYTES = 5 * 1024 * 1024
DAY = 86400.0
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LAUNCHERS = ("warm", "spawn")
POSTGRES_SCHEMES = ("postgresql", "postgres")
ENV = {
    "database": "YS_DATABASE",
    "concurrency": "YS_CONCURRENCY",
    "on_failure": "YS_ON_FAILURE",
    "log_max_bytes": "YS_LOG_MAX_BYTES",
    "otel": "YS_OTEL",
    "lease_seconds": "YS_LEASE_SECONDS",
    "grace_seconds": "YS_GRACE_SECONDS",
    "cancel_grace_seconds": "YS_CANCEL_GRACE_SECONDS",
    "retry_base_seconds": "YS_RETRY_BASE_SECONDS",
    "retention_days": "YS_RETENTION_DAYS",
    "daemon_log_max_bytes": "YS_DAEMON_LOG_MAX_BYTES",
    "log_level": "YS_LOG_LEVEL",
    "launcher": "YS_LAUNCHER",
    "keepalive_seconds": "YS_KEEPALIVE_SECONDS",
    "read_timeout_seconds": "YS_READ_TIMEOUT_SECONDS",
    "cgroup_root": "YS_CGROUP_ROOT",
}
# The daemon's tuning values: what `ys daemon status --json` shows as `settings`, and `ys
# doctor` when they differ from the defaults (the database is shown apart, without password).
TUNING = tuple(k for k in ENV if k not in ("database", "cgroup_root"))
Tuning = str | int | float  # a tuning value (a duration in seconds, a size, a name)
V = TypeVar("V")
_MASK = "***"
# libpq connection parameters that carry a secret (a password, or a file's passphrase)
_SECRET_PARAMS = {"password", "sslpassword"}


def otel_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The standard OpenTelemetry variables in `env` (OTEL_*), as the daemon captures them."""
    return {k: v for k, v in env.items() if k.startswith("OTEL_")}


@dataclass(frozen=True)
class Settings:
    database: str | None = None  # a PostgreSQL URL, or None for the SQLite file
    concurrency: int = DEFAULT_CONCURRENCY
    on_failure: str | None = None
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES
    otel: bool | None = None  # None: the standard OTEL_* variables decide
    lease_seconds: float = 30.0
    grace_seconds: float = 10.0
    cancel_grace_seconds: float = 10.0
    retry_base_seconds: float = 1.0
    retention_days: float = 30.0
    daemon_log_max_bytes: int = DEFAULT_DAEMON_LOG_MAX_BYTES
    log_level: str = "INFO"
    launcher: str = "warm"
    keepalive_seconds: float = 75.0
    read_timeout_seconds: float = 30.0
    cgroup_root: str = "/sys/fs/cgroup"
    # the OTEL_* variables, captured with the rest (the exporter's endpoint and kind)
    otel_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def retention(self) -> float:
        """`retention_days` in seconds."""
        return self.retention_days * DAY

    def tuning(self) -> dict[str, Tuning]:
        """The tuning values in force, by their config.toml key."""
        return {key: getattr(self, key) for key in TUNING}

    def changed(self) -> dict[str, Tuning]:
        """The tuning values that differ from the defaults."""
        return changed(self.tuning())

    @property
    def postgres(self) -> bool:
        return self.database is not None

    def database_shown(self, sqlite_path: Path) -> str:
        """What `ys daemon status` and `ys doctor` show: the URL without its password, or the
        SQLite file."""
        return redact(self.database) if self.database else str(sqlite_path)


def changed(values: Mapping[str, V]) -> dict[str, V]:
    """The tuning values among `values` (a daemon's `settings`) that differ from the defaults."""
    default = Settings().tuning()
    return {k: v for k, v in values.items() if k in default and v != default[k]}


def shown(values: Mapping[str, object]) -> str:
    """What `ys doctor` and `ys daemon status` print of the tuning values: those that differ
    from the defaults, `key value` each, or that none does."""
    pairs = [
        f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in changed(values).items()
    ]
    return ", ".join(pairs) if pairs else "the defaults"


def redact(url: str) -> str:
    """The URL with any password (in the user part or a `password=` parameter) replaced by
    `***`, so that it can be logged and shown. Text that is not a URL is returned masked
    from its first `:` after a `//`, which keeps a malformed URL's password hidden too."""
    try:
        parts = urlsplit(url)
    except ValueError:
        head, sep, _ = url.partition("//")
        return f"{head}{sep}{_MASK}" if sep else _MASK
    netloc = parts.netloc
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:{_MASK}@{hosts}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k in _SECRET_PARAMS for k, _ in pairs):
            query = urlencode(
                [(k, _MASK if k in _SECRET_PARAMS else v) for k, v in pairs], safe="/*"
            )
    if not url.startswith(f"{parts.scheme}://"):
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    # urlunsplit drops an empty host (postgresql:///db, a local socket): keep the "//"
    return (
        f"{parts.scheme}://{netloc}{parts.path}"
        + (f"?{query}" if query else "")
        + (f"#{parts.fragment}" if parts.fragment else "")
    )


def config_file(config_dir: Path) -> Path:
    return config_dir / "config.toml"


def load(config_dir: Path, env: dict[str, str] | None = None, **options: Any) -> Settings:
    """The settings in force: `options` (a command's flags; None means not given) over the
    environment over `<config_dir>/config.toml` over the defaults. Raises InvalidArgument."""
    environ = os.environ if env is None else env
    values: dict[str, tuple[Any, str]] = {}  # key -> (raw value, where it came from)
    path = config_file(config_dir)
    for key, value in _read_file(path).items():
        if key not in ENV:
            raise InvalidArgument(
                "INVALID_ARGUMENT",
                f"{path}: unknown key {key!r}; the keys are {', '.join(sorted(ENV))}",
            )
        values[key] = (value, f"{path}: {key}")
    for key, name in ENV.items():
        text = environ.get(name)
        if text:  # an empty variable counts as unset, as for YS_DB and YS_HOME
            values[key] = (text, name)
    for key, value in options.items():
        if key not in ENV:
            raise TypeError(f"unknown setting {key!r}")
        if value is not None:
            values[key] = (value, f"--{key.replace('_', '-')}")
    parsed: dict[str, Any] = {key: _PARSE[key](raw, where) for key, (raw, where) in values.items()}
    return Settings(**parsed, otel_env=otel_variables(environ))


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"{path} is not valid TOML ({exc}); fix it or remove it"
        ) from None
    except OSError as exc:
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"cannot read {path} ({exc.strerror}); fix its permissions"
        ) from None


def _bad(where: str, what: str, value: Any) -> InvalidArgument:
    return InvalidArgument(
        "INVALID_ARGUMENT",
        f"{where} must be {what}, not {value!r}; fix it, or unset it for the default",
    )


def _database(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _bad(
            where,
            "a PostgreSQL URL (postgresql://user@host:port/db)",
            value if not isinstance(value, str) else "",
        )
    try:
        scheme = urlsplit(value).scheme
    except ValueError:
        scheme = ""
    if scheme not in POSTGRES_SCHEMES:
        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"{where} must be a PostgreSQL URL (postgresql://user@host:port/db), not "
            f"{redact(value)!r}; leave it unset to use the SQLite file",
        )
    return value


def _whole(value: Any, where: str, what: str) -> int:
    """A whole number >= 1, from TOML (an integer) or from the environment (its text)."""
    number: Any = value
    if isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            raise _bad(where, what, value) from None
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise _bad(where, what, value)
    return number


def _concurrency(value: Any, where: str) -> int:
    return _whole(value, where, "a whole number of deliveries, at least 1")


def _size(value: Any, where: str) -> int:
    """Bytes: a whole number from TOML, or a size (`65536`, `512K`, `10M`, `10MiB`)."""
    from ys.runenv import parse_size

    try:
        return parse_size(value.strip() if isinstance(value, str) else value)
    except ValueError:
        raise _bad(where, "a size in bytes, at least 1 (65536, 512K, 10M, 10MiB)", value) from None


def _duration(value: Any, where: str, what: str, *, positive: bool, unit: float = 1.0) -> float:
    """A duration in `unit`s (seconds unless said): a number from TOML, or text that
    ys.durations reads (a bare number counts `unit`s; `90s`, `10m`, `2h`, `1d` say their own)."""
    from ys.durations import MAX_TIME, parse_duration

    seconds = math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value) * unit
    elif isinstance(value, str):
        try:
            seconds = parse_duration(value, bare=unit)
        except InvalidArgument:
            pass
    if not ((0 < seconds) if positive else (0 <= seconds)) or not seconds <= MAX_TIME:
        raise _bad(where, what, value)
    return seconds / unit


def _positive(value: Any, where: str) -> float:
    return _duration(value, where, "a duration over 0 (90, 1.5, 90s, 2m)", positive=True)


def _not_negative(value: Any, where: str) -> float:
    return _duration(value, where, "a duration (0, 90, 1.5, 90s, 2m)", positive=False)


def _days(value: Any, where: str) -> float:
    return _duration(
        value,
        where,
        "a number of days over 0, or a duration (30, 0.5, 12h)",
        positive=True,
        unit=DAY,
    )


def _folder(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise _bad(where, "an absolute path", value)
    return value


def _choice(choices: tuple[str, ...], fold: Callable[[str], str]) -> Callable[[Any, str], str]:
    def parse(value: Any, where: str) -> str:
        text = fold(value.strip()) if isinstance(value, str) else None
        if text not in choices:
            what = " or ".join(choices) if len(choices) == 2 else f"one of {', '.join(choices)}"
            raise _bad(where, what, value)
        return text

    return parse


def _on_failure(value: Any, where: str) -> str:
    from ys.contract import check_workflow_name

    try:
        return check_workflow_name(value)
    except InvalidArgument:
        raise _bad(
            where, "a workflow name (letters, digits, '.', '_' or '-', at most 128)", value
        ) from None


def _otel(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise _bad(where, "true or false", value)


_PARSE: dict[str, Callable[[Any, str], Any]] = {
    "database": _database,
    "concurrency": _concurrency,
    "on_failure": _on_failure,
    "log_max_bytes": _size,
    "otel": _otel,
    "lease_seconds": _positive,
    "grace_seconds": _not_negative,
    "cancel_grace_seconds": _not_negative,
    "retry_base_seconds": _positive,
    "retention_days": _days,
    "daemon_log_max_bytes": _size,
    "log_level": _choice(LOG_LEVELS, str.upper),
    "launcher": _choice(LAUNCHERS, str.lower),
    "keepalive_seconds": _positive,
    "read_timeout_seconds": _positive,
    "cgroup_root": _folder,
}
