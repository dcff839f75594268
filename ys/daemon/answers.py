"""The worker operations' answers as JSON, written once for both edges that send them: the
worker channel (ys/daemon/channel.py) and the worker's HTTP routes. The delivery service
(ys.daemon.delivering) and the store answer with typed values; they become JSON only here
(docs/design.md, "Wire formats")."""

from __future__ import annotations

from ys.daemon import views
from ys.store.protocols import EffectState, Outcome, ValueFound
from ys.values import EffectStateJson, OutcomeJson, ValueFoundJson


def effect_state(state: EffectState) -> EffectStateJson:
    return state.to_json()


def effect_waited(wake_at: float) -> dict[str, float]:
    return {"wake_at": wake_at}


def value_waited(found: ValueFound | None) -> dict[str, ValueFoundJson | None]:
    return {"found": None if found is None else found.to_json()}


def outcome(recorded: Outcome) -> OutcomeJson:
    """An acknowledgement's answer: the outcome recorded (the first terminal one wins)."""
    return recorded.to_json()


def step_saved(cancel_requested: bool) -> dict[str, bool]:
    return {"cancel_requested": bool(cancel_requested)}


def deadline_set() -> dict[str, bool]:
    return {"ok": True}


def lease_renewed(expires_at: float) -> dict[str, str | None]:
    return {"lease_expires_at": views.iso(expires_at)}


def started(execution_id: str) -> dict[str, str]:
    return {"execution_id": execution_id}
