"""Boxes whose clocks differ by minutes, on one PostgreSQL database (docs/design.md, "On PostgreSQL"): leases,
deadlines and due times are the server's time, so a daemon whose clock runs 10 minutes ahead
and one whose clock runs 10 minutes behind, beside a correct one, deliver each execution once,
never take a lease another daemon still renews, and wake sleeps on time.

The skewed daemons run under libfaketime (Debian's `faketime` package): every process of
their box (the daemon, its workers, its `ys` commands) sees the wall clock off by FAKETIME,
and the monotonic clock as it is."""

from __future__ import annotations

import glob
import json
from collections import Counter

import pytest

from tests.pg_support import unavailable
from tests.support import Threads, events, lines, make_home, parse_iso, prelude, write_script

LIBFAKETIME = next(iter(sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))), "")

# Step "long" runs past a lease (3 s): its lease is renewed meanwhile, and a daemon that
# compared the lease's end with its own clock would find it expired and take the execution.
CLOCKED = """
    @ys.workflow
    def main(step, params):
        step.run("long", slow, params["dir"], params["id"] + ":long")
        step.sleep("nap", 1.0)
        step.run("after", note, params["dir"], params["id"] + ":after")
        return params["id"]


    def slow(d, line):
        import select

        note(d, line)
        select.select([], [], [], 4.0)  # (under libfaketime time.sleep fails with EINVAL)
"""


def skewed(offset: str) -> dict[str, str]:
    """The environment that makes a box's processes see the wall clock off by `offset`."""
    if not LIBFAKETIME:
        unavailable("libfaketime is missing; apt-get install faketime")
    return {
        "LD_PRELOAD": LIBFAKETIME,
        "FAKETIME": offset,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_NO_CACHE": "1",
    }


@pytest.fixture
def three_clocks(tmp_path, pg_url):
    """Three daemons on one database: a correct clock, one 10 min ahead, one 10 min behind."""
    hs = []
    for i, extra in enumerate(({}, skewed("+10m"), skewed("-10m"))):
        (tmp_path / f"box{i}").mkdir()
        h = make_home(tmp_path / f"box{i}", YS_DATABASE=pg_url, **extra)
        write_script(h, "clocked", CLOCKED, prelude(start_pid=False))
        hs.append(h)
    try:
        for h in hs:
            h.start(concurrency=4)
        yield hs
    finally:
        for h in hs:
            h.stop()


def test_daemons_ten_minutes_apart_deliver_each_execution_once(tmp_path, three_clocks):
    hs = three_clocks
    # the skew is real: each daemon stamps its start with its own clock
    began = [
        parse_iso(json.loads(h.ys("daemon", "status", "--json").stdout)["started_at"]) for h in hs
    ]
    assert began[1] - began[0] > 500 and began[0] - began[2] > 500, began
    fx = tmp_path / "fx"
    fx.mkdir(mode=0o777)
    ids = [f"t{i:02}" for i in range(12)]

    def trigger(i: int) -> str:
        with hs[i % 3].client() as c:
            return str(
                c.trigger("clocked", {"dir": str(fx), "id": ids[i]}, execution_id=ids[i])[
                    "execution_id"
                ]
            )

    assert Threads(len(ids), trigger).results() == ids
    with hs[0].client() as c:
        for eid in ids:
            # the whole run takes seconds: a wake written 10 min off would not come in time
            assert c.wait(eid, timeout=90)["status"] == "completed", eid
        histories = {eid: events(c, eid) for eid in ids}
    counts = Counter(lines(fx))
    assert set(counts) == {f"{i}:{s}" for i in ids for s in ("long", "after")}
    assert set(counts.values()) == {1}, [k for k, v in counts.items() if v > 1]
    for eid, history in histories.items():
        kinds = [e["kind"] for e in history]
        # one delivery up to the sleep, one after it: no lease taken from a live worker
        assert kinds.count("claimed") == 2, (eid, kinds)
        released = [e["data"] for e in history if e["kind"] == "released"]
        assert all(r.get("reason") != "lease_lost" for r in released), (eid, released)
    for h in hs:
        assert "lease expired" not in h.log(), h.log()[-3000:]
    # the skewed boxes said how far off their clocks are
    assert "ahead of the database server's" in hs[1].log()
    assert "behind the database server's" in hs[2].log()
