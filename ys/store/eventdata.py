"""Each event kind's data as a typed value (docs/design.md, "Events"): a write builds it once,
`to_json` gives the object the events table keeps (canonical text: rows.event_text), and
`event_data_of` reads a stored object once, where rows become events.

Stored objects round-trip exactly: a field a version of ys did not write stays absent (None),
and a key no field takes (another version's, or a value of a type the field does not hold) is
kept as it was in `extra`. `to_json` gives its keys in sorted order, the order the stored text
has, so a history read back shows the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, cast

from ys.values import OutcomeError

JsonObject = dict[str, object]  # a JSON object kept verbatim (an error, an unknown kind's data)


@dataclass(frozen=True)
class Parent:
    """The execution whose step started this one (a child start), as its `admitted` event and
    its record name it."""

    execution_id: str
    step_key: str
    detached: bool = False  # a cancel of the parent does not reach it

    def to_json(self) -> dict[str, str | bool]:
        return {
            "execution_id": self.execution_id,
            "step_key": self.step_key,
            "detached": self.detached,
        }


class _Reader:
    """Takes a stored object's keys one by one; what no field took is the value's `extra`."""

    __slots__ = ("left", "of")

    def __init__(self, of: str, data: Mapping[str, object]) -> None:
        self.of = of
        self.left = dict(data)

    def text(self, key: str) -> str | None:
        v = self.left.get(key)
        return self.left.pop(key) if isinstance(v, str) else None  # type: ignore[return-value]

    def need_str(self, key: str) -> str:
        v = self.text(key)
        if v is None:
            raise ValueError(f"a {self.of} event without its {key}")
        return v

    def num(self, key: str) -> float | None:
        v = self.left.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool):
            del self.left[key]
            return v
        return None

    def whole(self, key: str) -> int | None:
        v = self.left.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            del self.left[key]
            return v
        return None

    def flag(self, key: str) -> bool | None:
        v = self.left.get(key)
        return self.left.pop(key) if isinstance(v, bool) else None  # type: ignore[return-value]

    def obj(self, key: str) -> JsonObject | None:
        v = self.left.get(key)
        return self.left.pop(key) if isinstance(v, dict) else None  # type: ignore[return-value]

    def value(self, key: str) -> object:
        """A JSON value of any type; None when absent (a stored null stays in `extra`)."""
        return self.left.pop(key) if self.left.get(key) is not None else None

    def texts(self, key: str) -> tuple[str, ...] | None:
        v = self.left.get(key)
        if isinstance(v, list) and all(isinstance(w, str) for w in v):
            del self.left[key]
            return tuple(v)
        return None

    def tags(self, key: str) -> dict[str, str] | None:
        v = self.left.get(key)
        if isinstance(v, dict) and all(isinstance(w, str) for w in v.values()):
            return self.left.pop(key)  # type: ignore[return-value]
        return None

    def parent(self, key: str) -> Parent | None:
        v = self.left.get(key)
        if (
            isinstance(v, dict)
            and v.keys() <= {"execution_id", "step_key", "detached"}
            and isinstance(v.get("execution_id"), str)
            and isinstance(v.get("step_key"), str)
        ):
            # `Parent.to_json` writes all three; one without "detached" is read as before
            # (a falsy one: not detached) and written back with it
            del self.left[key]
            return Parent(v["execution_id"], v["step_key"], bool(v.get("detached")))
        return None

    def extra(self) -> Mapping[str, object] | None:
        return self.left or None


def _out(pairs: list[tuple[str, object]], extra: Mapping[str, object] | None) -> JsonObject:
    """`pairs` (in sorted key order) without the absent ones, and `extra`, in sorted order."""
    return _with({k: v for k, v in pairs if v is not None}, extra)


def _with(out: JsonObject, extra: Mapping[str, object] | None) -> JsonObject:
    """`out` (its keys in sorted order) with `extra`, in sorted order."""
    if extra:
        out.update(extra)
        return dict(sorted(out.items()))
    return out


def _list(values: tuple[str, ...] | None) -> list[str] | None:
    return None if values is None else list(values)


@dataclass(frozen=True)
class AdmittedData:
    """The first event: what the record is made of. `params`, `context`: canonical JSON text
    (`RawJSON`, embedded unchanged) as admitted; the decoded value when read back."""

    KIND: ClassVar[str] = "admitted"
    execution_id: str
    workflow: str
    params: object
    context: object = None
    parent: Parent | None = None
    script_sha256: str | None = None
    tags: dict[str, str] | None = None
    retry_of: str | None = None
    due_at: float | None = None  # a first wake later than the admission (`ys trigger --in`)
    extra: Mapping[str, object] | None = None  # keys no field takes, kept verbatim

    def to_json(self) -> JsonObject:
        parent = self.parent.to_json() if self.parent is not None else None
        return _out(
            [
                ("context", self.context),
                ("due_at", self.due_at),
                ("execution_id", self.execution_id),
                ("params", self.params),
                ("parent", parent),
                ("retry_of", self.retry_of),
                ("script_sha256", self.script_sha256),
                ("tags", self.tags),
                ("workflow", self.workflow),
            ],
            self.extra,
        )

    @staticmethod
    def from_json(r: _Reader) -> AdmittedData:
        return AdmittedData(
            context=r.value("context"),
            due_at=r.num("due_at"),
            execution_id=r.need_str("execution_id"),
            params=r.value("params"),
            parent=r.parent("parent"),
            retry_of=r.text("retry_of"),
            script_sha256=r.text("script_sha256"),
            tags=r.tags("tags"),
            workflow=r.need_str("workflow"),
            extra=r.extra(),
        )


@dataclass(frozen=True)
class WakeRequestedData:
    KIND: ClassVar[str] = "wake_requested"
    due_at: float
    reason: str | None = None
    extra: Mapping[str, object] | None = None  # keys no field takes, kept verbatim

    def to_json(self) -> JsonObject:
        return _out([("due_at", self.due_at), ("reason", self.reason)], self.extra)

    @staticmethod
    def from_json(r: _Reader) -> WakeRequestedData:
        due = r.num("due_at")
        if due is None:
            raise ValueError("a wake_requested event without its due_at")
        return WakeRequestedData(due, r.text("reason"), r.extra())


@dataclass(frozen=True)
class ClaimedData:
    KIND: ClassVar[str] = "claimed"
    attempt: int | None = None
    daemon_id: str | None = None  # the daemon that ran it, when not this box's default
    script_sha256: str | None = None  # the script version the delivery ran
    extra: Mapping[str, object] | None = None  # keys no field takes, kept verbatim

    def to_json(self) -> JsonObject:
        out: JsonObject = {}  # written out, as a step's: a claim is the hot path
        if self.attempt is not None:
            out["attempt"] = self.attempt
        if self.daemon_id is not None:
            out["daemon_id"] = self.daemon_id
        if self.script_sha256 is not None:
            out["script_sha256"] = self.script_sha256
        return _with(out, self.extra)

    @staticmethod
    def from_json(r: _Reader) -> ClaimedData:
        return ClaimedData(
            r.whole("attempt"), r.text("daemon_id"), r.text("script_sha256"), r.extra()
        )


@dataclass(frozen=True)
class StepData:
    """A step's save. `attempts` absent means 1; `error` is the failed attempt's error as the
    step saved it (kept verbatim); `copied_from` names the execution a retry copied it from."""

    KIND: ClassVar[str] = "step"
    key: str
    kind: str | None = None  # absent: "run"
    status: str | None = None  # absent: "waiting"
    attempts: int | None = None
    wake_at: float | None = None
    error: Mapping[str, object] | None = None  # kept verbatim
    copied_from: str | None = None
    extra: Mapping[str, object] | None = None  # keys no field takes, kept verbatim

    @property
    def waiting(self) -> bool:
        return self.status is None or self.status == "waiting"

    def to_json(self) -> JsonObject:
        # written out, not through `_out`: a step's save is the hot path
        out: JsonObject = {}
        if self.attempts is not None:
            out["attempts"] = self.attempts
        if self.copied_from is not None:
            out["copied_from"] = self.copied_from
        if self.error is not None:
            out["error"] = self.error
        out["key"] = self.key
        if self.kind is not None:
            out["kind"] = self.kind
        if self.status is not None:
            out["status"] = self.status
        if self.wake_at is not None:
            out["wake_at"] = self.wake_at
        return _with(out, self.extra)

    @staticmethod
    def from_json(r: _Reader) -> StepData:
        return StepData(
            attempts=r.whole("attempts"),
            copied_from=r.text("copied_from"),
            error=r.obj("error"),
            key=r.need_str("key"),
            kind=r.text("kind"),
            status=r.text("status"),
            wake_at=r.num("wake_at"),
            extra=r.extra(),
        )


@dataclass(frozen=True)
class ReleasedData:
    """A delivery ended without an outcome: why (`reason`), when it may run again, and what
    its daemon saw (`detail`)."""

    KIND: ClassVar[str] = "released"
    reason: str | None = None
    retry_at: float | None = None
    detail: str | None = None
    extra: Mapping[str, object] | None = None  # keys no field takes, kept verbatim

    def to_json(self) -> JsonObject:
        return _out(
            [("detail", self.detail), ("reason", self.reason), ("retry_at", self.retry_at)],
            self.extra,
        )

    @staticmethod
    def from_json(r: _Reader) -> ReleasedData:
        return ReleasedData(r.text("reason"), r.num("retry_at"), r.text("detail"), r.extra())


@dataclass(frozen=True)
class CancelRequestedData:
    KIND: ClassVar[str] = "cancel_requested"
    by: str | None = None  # "parent": the parent's cancel reached it
    extra: Mapping[str, object] | None = None  # keys no field takes, kept verbatim

    def to_json(self) -> JsonObject:
        return _out([("by", self.by)], self.extra)

    @staticmethod
    def from_json(r: _Reader) -> CancelRequestedData:
        return CancelRequestedData(r.text("by"), r.extra())


# The outcome kinds carry what the delivery warned of (`warnings`), for `describe` only
# (docs/design.md, "Warnings of a delivery").


@dataclass(frozen=True)
class SuspendedData:
    KIND: ClassVar[str] = "suspended"
    warnings: tuple[str, ...] | None = None
    extra: Mapping[str, object] | None = None  # keys no field takes, kept verbatim

    def to_json(self) -> JsonObject:
        return _out([("warnings", _list(self.warnings))], self.extra)

    @staticmethod
    def from_json(r: _Reader) -> SuspendedData:
        return SuspendedData(r.texts("warnings"), r.extra())


@dataclass(frozen=True)
class CompletedData:
    """`result`: the workflow's result as plain JSON (null included)."""

    KIND: ClassVar[str] = "completed"
    result: object
    warnings: tuple[str, ...] | None = None
    extra: Mapping[str, object] | None = None  # keys no field takes, kept verbatim

    def to_json(self) -> JsonObject:
        out = _out([("warnings", _list(self.warnings))], self.extra)
        out["result"] = self.result
        return dict(sorted(out.items())) if len(out) > 1 else out

    @staticmethod
    def from_json(r: _Reader) -> CompletedData:
        if "result" not in r.left:
            raise ValueError("a completed event without its result")
        return CompletedData(r.left.pop("result"), r.texts("warnings"), r.extra())


@dataclass(frozen=True)
class FailedData:
    """`error`: as `OutcomeError.to_json` or the store's own failures wrote it (verbatim)."""

    KIND: ClassVar[str] = "failed"
    error: Mapping[str, object]  # kept verbatim
    warnings: tuple[str, ...] | None = None
    extra: Mapping[str, object] | None = None  # keys no field takes, kept verbatim

    def outcome_error(self) -> OutcomeError:
        """The error as the record keeps it."""
        return error_of_json(self.error)

    def to_json(self) -> JsonObject:
        return _out([("error", self.error), ("warnings", _list(self.warnings))], self.extra)

    @staticmethod
    def from_json(r: _Reader) -> FailedData:
        error = r.obj("error")
        if error is None:
            raise ValueError("a failed event without its error")
        return FailedData(error, r.texts("warnings"), r.extra())


@dataclass(frozen=True)
class CancelledData:
    KIND: ClassVar[str] = "cancelled"
    at_once: bool | None = None  # `ys cancel --now`
    warnings: tuple[str, ...] | None = None
    extra: Mapping[str, object] | None = None  # keys no field takes, kept verbatim

    def to_json(self) -> JsonObject:
        return _out([("at_once", self.at_once), ("warnings", _list(self.warnings))], self.extra)

    @staticmethod
    def from_json(r: _Reader) -> CancelledData:
        return CancelledData(r.flag("at_once"), r.texts("warnings"), r.extra())


@dataclass(frozen=True)
class UnknownData:
    """An event of a kind this version does not know (kept verbatim; `apply` refuses it)."""

    kind: str
    data: JsonObject

    def to_json(self) -> JsonObject:
        return self.data


EventData = (
    AdmittedData
    | WakeRequestedData
    | ClaimedData
    | StepData
    | ReleasedData
    | SuspendedData
    | CancelRequestedData
    | CompletedData
    | FailedData
    | CancelledData
    | UnknownData
)

Ending = (
    ReleasedData | SuspendedData | CompletedData | FailedData | CancelledData
)  # what ends a delivery

_KINDS = {
    c.KIND: c.from_json
    for c in (
        AdmittedData,
        WakeRequestedData,
        ClaimedData,
        StepData,
        ReleasedData,
        SuspendedData,
        CancelRequestedData,
        CompletedData,
        FailedData,
        CancelledData,
    )
}


KNOWN_KINDS = frozenset(_KINDS)  # the kinds this version reads (others: UnknownData)


def event_data_of(kind: str, data: object) -> EventData:
    """A stored event's data (its decoded JSON) as its kind's value. Raises ValueError for
    data its kind must have and does not."""
    if not isinstance(data, dict):
        raise ValueError(f"a {kind} event's data is not an object")
    read = _KINDS.get(kind)
    if read is None:
        return UnknownData(kind, data)
    return read(_Reader(kind, data))


def stored_event_data(kind: str, data: object) -> EventData:
    """A stored event's data as `event_data_of` reads it; an object that does not read as its
    kind (another version's, a row edited by hand) is kept verbatim as `UnknownData`, so a
    history or the event stream still shows it as it is, and `apply` refuses it (`verify`
    says the history does not fold)."""
    try:
        return event_data_of(kind, data)
    except ValueError:
        if isinstance(data, dict):
            return UnknownData(kind, data)
        raise


def warnings_of(data: EventData) -> tuple[str, ...]:
    """What the delivery that `data` ended warned of."""
    if isinstance(data, SuspendedData | CompletedData | FailedData | CancelledData):
        return data.warnings or ()
    return ()


def error_of_json(data: Mapping[str, object]) -> OutcomeError:
    """A failed outcome's error (written by `OutcomeError.to_json` or the store's own
    failures), as the record keeps it."""
    return OutcomeError(
        cast(str, data["name"]),
        str(data.get("message", "")),
        code=cast(str | None, data.get("code")),
        traceback=cast(str | None, data.get("traceback")),
        cause=data.get("cause"),
    )
