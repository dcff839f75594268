"""A worker the dispatcher cannot supervise (here: its pid cannot be recorded, because the
workers folder is a file) must not run on unwatched: it is killed at once and the execution
stays due for another delivery."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import alive, fixture_dir, make_home, wait_until

pytestmark = pytest.mark.e2e


def test_a_worker_whose_pid_cannot_be_recorded_is_killed_not_left_unwatched(tmp_path: Path):
    fx = fixture_dir(tmp_path)
    with make_home(tmp_path) as h:
        h.write(
            "long.py",
            f"""
            import os, pathlib, time
            import ys

            @ys.workflow
            def main(step, params):
                pathlib.Path({str(fx)!r}, "pid").write_text(str(os.getpid()))
                time.sleep(60)
                return "ran unwatched"
        """,
        )
        h.start()
        workers = h.home / "run" / "workers"
        if workers.is_dir():
            os.rmdir(workers)
        workers.write_text("not a folder\n")  # record_worker cannot write under it
        h.client().trigger("long", {}, execution_id="long-1")
        # Twice: the second delivery comes after the first one's lease (3 s) expired, long
        # after an unkilled first worker would have written its pid.
        wait_until(
            lambda: h.log().count("delivery of long-1 failed in the dispatcher") >= 2,
            timeout=30,
            message="two deliveries the dispatcher could not supervise",
        )
        pid_file = fx / "pid"

        def gone() -> bool:  # killed before or after it wrote its pid; never left running
            text = pid_file.read_text() if pid_file.exists() else ""
            return not text or not alive(int(text))

        wait_until(gone, timeout=10, message="the unwatched worker killed")
        record = h.client().get("long-1")
        assert record["outcome"] is None  # no outcome: it is delivered again
