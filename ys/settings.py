"""Settings (DESIGN.md §7): `<config>/config.toml`, read with tomllib; the environment wins over
it, and a command-line option over both.

    database       YS_DATABASE        a PostgreSQL URL; absent: the SQLite file (YS_DB)
    concurrency    YS_CONCURRENCY     deliveries at once, per daemon (default 4)
    on_failure     YS_ON_FAILURE      the folder-wide failure handler (a workflow name)
    log_max_bytes  YS_LOG_MAX_BYTES   the most one delivery log keeps (default 10 MiB)
    otel           YS_OTEL            export traces (true/false; unset: the OTEL_* variables
                                      decide, docs/design.md "Traces")

An unknown key or a bad value is an INVALID_ARGUMENT naming where it came from: `ys doctor`
reports it and the daemon refuses to start with it. A database URL may carry a password, so
every message and every display goes through `redact`. Standard library only.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ys.errors import InvalidArgument

DEFAULT_CONCURRENCY = 4
DEFAULT_LOG_MAX_BYTES = 10 * 1024 * 1024
POSTGRES_SCHEMES = ("postgresql", "postgres")
ENV = {
    "database": "YS_DATABASE",
    "concurrency": "YS_CONCURRENCY",
    "on_failure": "YS_ON_FAILURE",
    "log_max_bytes": "YS_LOG_MAX_BYTES",
    "otel": "YS_OTEL",
}
_MASK = "***"
# libpq connection parameters that carry a secret (a password, or a file's passphrase)
_SECRET_PARAMS = {"password", "sslpassword"}


@dataclass(frozen=True)
class Settings:
    database: str | None = None  # a PostgreSQL URL, or None for the SQLite file
    concurrency: int = DEFAULT_CONCURRENCY
    on_failure: str | None = None
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES
    otel: bool | None = None  # None: the standard OTEL_* variables decide

    @property
    def postgres(self) -> bool:
        return self.database is not None

    def database_shown(self, sqlite_path: Path) -> str:
        """What `ys daemon status` and `ys doctor` show: the URL without its password, or the
        SQLite file."""
        return redact(self.database) if self.database else str(sqlite_path)


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
    return Settings(**parsed)


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


def _log_max_bytes(value: Any, where: str) -> int:
    return _whole(value, where, "a whole number of bytes, at least 1")


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
    "log_max_bytes": _log_max_bytes,
    "otel": _otel,
}
