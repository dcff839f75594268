"""Workflow scripts are compiled once per version (ys/worker/codecache.py): the code is cached in the
data folder, private, keyed by the script's hash, and a changed script runs its new code."""

from __future__ import annotations

import stat

from tests.support import wait_until

V1 = """
import ys

@ys.workflow
def main(step, params):
    return "v1"
"""


def test_a_script_is_compiled_once_into_a_private_cache_and_a_new_version_runs(daemon):
    daemon.write("versioned.py", V1)
    cache = daemon.home / "code"
    with daemon.client() as c:
        wait_until(
            lambda: "versioned" in {w["name"] for w in c.workflows()["workflows"]},
            message="the script is registered",
        )
        first = c.wait(c.trigger("versioned")["execution_id"], timeout=60)
        assert first["outcome"]["result"] == "v1"
        [entry] = list(cache.iterdir())
        assert stat.S_IMODE(cache.stat().st_mode) == 0o700
        assert stat.S_IMODE(entry.stat().st_mode) == 0o600
        again = c.wait(c.trigger("versioned")["execution_id"], timeout=60)
        assert again["outcome"]["result"] == "v1"
        assert list(cache.iterdir()) == [entry]  # the same version: no second compile

        daemon.write("versioned.py", V1.replace('"v1"', '"v2"'))

        def runs_v2() -> bool:
            r = c.wait(c.trigger("versioned")["execution_id"], timeout=60)
            return r["outcome"]["result"] == "v2"

        wait_until(runs_v2, timeout=30, message="the new version runs")
    assert len(list(cache.iterdir())) == 2


def test_gc_prunes_compiled_versions_no_delivery_loaded_and_keeps_those_in_use(daemon):
    """A cached version a delivery loads has its time brought forward (at most once a day),
    so gc removes only the versions unused for the retention period, and litter."""
    import os
    import time

    daemon.write("versioned.py", V1)
    cache = daemon.home / "code"
    month = 40 * 86400
    with daemon.client() as c:
        wait_until(
            lambda: "versioned" in {w["name"] for w in c.workflows()["workflows"]},
            message="the script is registered",
        )
        assert c.wait(c.trigger("versioned")["execution_id"], timeout=60)["status"] == "completed"
        [used] = list(cache.iterdir())
        old = time.time() - month
        os.utime(used, (old, old))  # as if compiled long ago: the next delivery loads it
        assert c.wait(c.trigger("versioned")["execution_id"], timeout=60)["status"] == "completed"
        assert used.stat().st_mtime > old + month / 2
        unused = cache / ("0" * 64 + ".code")
        unused.write_bytes(b"not loaded by anyone")
        litter = cache / f".{'1' * 64}.code.123"
        litter.write_bytes(b"half")
        for f in (unused, litter):
            os.utime(f, (old, old))
    gc = daemon.ys("gc", "--older-than", "30d")
    assert gc.returncode == 0, gc.stderr
    assert sorted(p.name for p in cache.iterdir()) == [used.name]
