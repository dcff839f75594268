"""Values shared by the SDK side (workflow code, the worker) and the daemon and store, kept
free of imports so a worker pays nothing to load them (docs/design.md, "Wire formats")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

# A user's own JSON, opaque to ys (params, a step's or a workflow's result, an error's details, a
# durable value, an event's data as the user gave it). ys never reads fields out of it; every
# value whose fields ys reads or writes is a frozen dataclass instead (docs/design.md, "Wire
# formats").
UserJson = Any
UserObject = dict[str, Any]


class EffectStateJson(TypedDict):
    """An effect's begin or settle answered on the wire (the worker channel, the HTTP route)."""

    status: str  # new | pending | settled | conflict
    result: NotRequired[str]  # canonical JSON of the settled result
    conflicting_result: NotRequired[str]  # a conflicting settle's result


class ValueFoundJson(TypedDict):
    """A durable value's wait answered when the key is at a newer version."""

    key: str
    value: str  # canonical JSON text
    version: int
    updated_at: float


@dataclass(frozen=True)
class StepWrite:
    """One step as the workflow saves it: carried unchanged from the SDK's request (over the
    worker channel or HTTP) to the store's write, and read back to a worker as its saved steps."""

    kind: str  # run | sleep | call | wait | effect | ...
    status: str  # completed | failed | waiting
    value: str | None  # canonical JSON text of the result or the tagged error
    attempts: int = 1
    wake_at: float | None = None  # when a waiting step is due


OUTCOME_STATUSES = ("completed", "failed", "cancelled", "suspended")


class OutcomeErrorJson(TypedDict):
    """An outcome's error on the wire (docs/API.md, WorkflowRunOutcome)."""

    name: str
    message: str
    code: NotRequired[str]
    traceback: NotRequired[str]
    cause: NotRequired[UserJson]


class OutcomeJson(TypedDict):
    """An outcome on the wire: a record's `outcome`, and the answer to the worker's request."""

    status: str
    result: NotRequired[UserJson]  # a completed outcome's
    error: NotRequired[OutcomeErrorJson]  # a failed (or cancelled) outcome's
    warnings: NotRequired[list[str]]  # sent by a worker (a delivery's warnings), never answered


@dataclass(frozen=True)
class OutcomeError:
    """A failed outcome's error, as ys keeps it: its name and message, and what the SDK adds."""

    name: str
    message: str = ""
    code: str | None = None
    traceback: str | None = None
    cause: UserJson = None  # any durable value, the user's

    def to_json(self) -> OutcomeErrorJson:
        out: OutcomeErrorJson = {"name": self.name, "message": self.message}
        if self.code is not None:
            out["code"] = self.code
        if self.traceback is not None:
            out["traceback"] = self.traceback
        if self.cause is not None:
            out["cause"] = self.cause
        return out


@dataclass(frozen=True)
class Outcome:
    """How a delivery ended (a WorkflowRunOutcome): read from its JSON once where it enters the
    daemon (ys.outcomes), carried to the store's write, and answered back the same way."""

    status: str  # completed | failed | cancelled | suspended
    result: UserJson = None  # a completed workflow's result
    error: OutcomeError | None = None  # a failed workflow's error
    warnings: tuple[str, ...] | None = None  # what the delivery warned of (never answered)

    def to_json(self) -> OutcomeJson:
        """The outcome as a record shows it and the worker's request is answered (JSON)."""
        out: OutcomeJson = {"status": self.status}
        if self.status == "completed":
            out["result"] = self.result
        elif self.error is not None:
            out["error"] = self.error.to_json()
        return out
