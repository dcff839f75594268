"""`ys doctor`'s checks of the settings and of a PostgreSQL database (the SQLite file's are in
doctor.py). Read-only: nothing here writes to the database or migrates it."""

from __future__ import annotations

from ys.commands.doctor import Check, failed, passed
from ys.errors import DatabaseMoved, YsError
from ys.paths import Paths
from ys.settings import Settings, config_file, load, redact


def check_settings(paths: Paths) -> tuple[Check, Settings | None]:
    """config.toml and the YS_ settings, as the daemon would read them."""
    try:
        settings = load(paths.config)
    except YsError as exc:
        return failed("settings", f"{exc.message} (the daemon refuses to start with it)"), None
    path = config_file(paths.config)
    where = str(path) if path.exists() else f"defaults ({path} does not exist)"
    database = (
        f"PostgreSQL at {redact(settings.database)}"
        if settings.database
        else f"the SQLite file {paths.db}"
    )
    return passed(
        "settings", f"{where}; database: {database}; concurrency {settings.concurrency}"
    ), settings


def _why(exc: YsError) -> str:
    """ " is unreachable" where a connection could not be made (ys.store.postgres.connect)."""
    return " is unreachable" if exc.context.get("unreachable") else ""


def check_postgres(url: str) -> list[Check]:
    """The database is reachable, its schema this version's, and every record equal to its
    folded history (in one REPEATABLE READ snapshot, as daemons go on writing)."""
    shown = redact(url)
    from ys.store import inspect_postgres

    try:
        report = inspect_postgres(url)
    except ImportError as exc:
        return [
            failed(
                "database",
                f"PostgreSQL at {shown}, but the adapter cannot load "
                f"({exc}); run pip install 'ys[postgres]'",
            )
        ]
    except YsError as exc:
        return [failed("database", f"PostgreSQL at {shown}{_why(exc)}: {exc.message}")]
    if report.moved_to:
        return [
            failed("database", DatabaseMoved(f"PostgreSQL at {shown}", report.moved_to).message)
        ]
    out = [passed("database", f"PostgreSQL at {shown} (server {report.server_version})")]
    version, latest = report.schema_version, report.latest_version
    if version != latest:
        out.append(
            failed(
                "schema",
                f"version {version} of {latest}; start the daemon of this version to migrate",
            )
        )
        return out
    sizes = ", ".join(f"{name} {n}" for name, n in report.rows.items())
    out.append(passed("schema", f"version {version}; rows: {sizes}"))
    mismatches = report.mismatches
    if mismatches is None:
        return out
    if mismatches:
        listed = "; ".join(mismatches[:5]) + (
            f" (and {len(mismatches) - 5} more)" if len(mismatches) > 5 else ""
        )
        out.append(
            failed("histories", f"{len(mismatches)} record(s) differ from their history: {listed}")
        )
    else:
        out.append(
            passed(
                "histories",
                f"{report.rows.get('executions', 0)} execution(s); "
                "every record equals its folded history",
            )
        )
    return out
