"""Values shared by the SDK side (workflow code, the worker) and the daemon and store, kept
free of imports so a worker pays nothing to load them (docs/design.md, "Wire formats")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# A user's own JSON, opaque to ys (params, a step's or a workflow's result, an error's details, a
# durable value, an event's data as the user gave it). ys never reads fields out of it; every
# value whose fields ys reads or writes is a frozen dataclass instead (docs/design.md, "Wire
# formats").
UserJson = Any
UserObject = dict[str, Any]


@dataclass(frozen=True)
class StepWrite:
    """One step as the workflow saves it: carried unchanged from the SDK's request (over the
    worker channel or HTTP) to the store's write, and read back to a worker as its saved steps."""

    kind: str  # run | sleep | call | wait | effect | ...
    status: str  # completed | failed | waiting
    value: str | None  # canonical JSON text of the result or the tagged error
    attempts: int = 1
    wake_at: float | None = None  # when a waiting step is due
