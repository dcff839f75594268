"""Fixtures for RFC 004's conformance tables (durable external effect).

The effect client itself is tested per adapter in tests/store/test_effect_client.py.
`shared_daemon` is a real daemon in a temp home shared by one module's end-to-end tests that
need no environment of their own (starting daemons is the slow part); tests with crash points
use `ys_home` (tests/conftest.py). Plain helpers are in effects_support.py and
tests/support.py; the fake payment provider is in fake_provider.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import DaemonHandle, make_home


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHandle]:
    """A running daemon (lease 3 s, retry base 0.2 s) in a temp home, for one test module."""
    with make_home(tmp_path_factory.mktemp("effects-home")) as h:
        yield h.start(concurrency=8)
