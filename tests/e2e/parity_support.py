"""Run one workflow script two ways, through a real daemon and through `ys.testing`, and
compare: `ys.testing` promises the daemon's outcomes, so a difference is a bug in one of them.

    real, sim = run_both(daemon, "bad_key.py", SOURCE)
    assert real == sim                       # status, error, history's event kinds
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.support import DaemonHandle, kinds
from ys.testing import WorkflowTest

TERMINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class Run:
    """How one execution went: its status, its result or its error's name and code (the
    message may be worded by the daemon's request check or by the store's), the kinds of its
    history's events in order, and its whole outcome (not compared)."""

    status: str
    ended: tuple[Any, ...]
    kinds: tuple[str, ...]
    outcome: dict[str, Any] | None = field(default=None, compare=False)
    execution_id: str = field(default="", compare=False)

    @classmethod
    def of(cls, record: dict[str, Any], kinds: list[str]) -> Run:
        outcome = record.get("outcome") or {}
        error = outcome.get("error") or {}
        ended = (outcome.get("result"), error.get("name"), error.get("code"))
        return cls(
            record["status"], ended, tuple(kinds), record.get("outcome"), record["execution_id"]
        )

    @property
    def deliveries(self) -> int:
        return self.kinds.count("claimed")


def run_both(
    daemon: DaemonHandle,
    filename: str,
    source: str,
    params: Any = None,
    *,
    mode: int = 0o600,
    timeout: float = 30.0,
) -> tuple[Run, Run]:
    """The script `filename` (written into the daemon's workflows folder) run to its end by
    the daemon, then by `ys.testing` (its clock moved to each due time)."""
    path = daemon.write(filename, source, mode=mode)
    name = path.name.removesuffix(".py")
    c = daemon.client()
    eid = c.trigger(name, params)["execution_id"]
    record = c.wait(eid, timeout=timeout)
    real = Run.of(record, kinds(c, eid))
    with WorkflowTest(daemon.workflows) as t:
        teid = t.trigger(name, params)
        rec = t.run_until_terminal(teid)
        sim = Run.of(rec, [e.kind for e in t.store.events(teid)])
    return real, sim
