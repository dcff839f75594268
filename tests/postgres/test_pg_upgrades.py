"""A PostgreSQL database written by the first ys that had the PostgreSQL adapter (and by the
first whose adapter had durable values) opens in this one with nothing lost (as tests/e2e/test_upgrades.py for SQLite): that ys, built from git
history into a venv of its own (tests/upgrade_support.py), writes executions in every status,
values, an effect and a schedule through its own daemon and CLI on the test's database; then
today's daemon reads every record back the same, the sleeping and waiting ones finish, and a
second start migrates nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.upgrade_support import opens_with_nothing_lost, write_with

# The merge that brought the PostgreSQL adapter to main (its first part); the commits
# on its branch before it held parts of the adapter only. Its daemon on PostgreSQL could not
# reach durable values (the API called store_put, store_wait, ...: names only the SQLite
# store had), so it writes everything else; the first commit whose daemon on PostgreSQL
# writes values too (the store's typed protocols) writes them all.
RELEASES = [("a22fad1", False), ("4761dcd", True)]


def _migrations(url: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT version, applied_at FROM schema_migrations ORDER BY version")
        return [tuple(r) for r in rows.fetchall()]


@pytest.mark.parametrize("commit, values", RELEASES)
def test_a_postgresql_database_of_the_first_ys_with_the_adapter_opens_with_nothing_lost(
    commit: str, values: bool, tmp_path: Path, pg_url: str
):
    h, old = write_with(commit, tmp_path, values, YS_DATABASE=pg_url)
    written = _migrations(pg_url)
    opens_with_nothing_lost(h, old, commit, lambda: _migrations(pg_url), values)
    assert len(_migrations(pg_url)) > len(written)  # today's ys did migrate it once
