"""A database written by an earlier released ys opens in this one with nothing lost.

Each earlier state (a commit that closed a milestone) writes a database through its own
daemon and CLI (tests/upgrade_support.py); then today's daemon opens it: every record reads
back the same, the sleeping and waiting ones wake and finish, the schedule keeps its cursor,
and a second start migrates nothing. Never skipped: CI clones with full history, and a
missing commit fails loudly.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.upgrade_support import opens_with_nothing_lost, write_with

# The first store with a daemon and CLI that can write every kind of record the test checks
# (cron schedules, values, effects), a store rewrite after it, and the last stop.
RELEASES = ["a6cd899", "53e9ec3", "446073a"]


def _migrations(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT version, applied_at FROM schema_migrations").fetchall()


@pytest.mark.parametrize("commit", RELEASES)
def test_a_database_of_an_earlier_ys_opens_with_nothing_lost(commit: str, tmp_path: Path):
    h, old = write_with(commit, tmp_path)
    opens_with_nothing_lost(h, old, commit, lambda: _migrations(h.db))
