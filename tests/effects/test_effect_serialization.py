"""RFC 004's serialization tests: every valid durable value round-trips through an effect's
input and result (the store of every adapter, the driver and the recorded step) without
changing its type or value, an error-shaped plain dict included; every invalid value is
refused; a suspended effect step stays unfinished after serialization and deserialization."""

from __future__ import annotations

import itertools
import json
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from effects_support import T0, FakeClient, FakeProvider, Unknown
from hypothesis import HealthCheck, example, given, settings

import ys.sdk
from tests.durable_values import assert_same, durable_values, normalized
from tests.store.adapters import ADAPTERS, Adapter
from ys import codec
from ys.codec import ErrorValue
from ys.errors import WorkflowEffectError
from ys.sdk import InfrastructureFailure
from ys.store.protocols import EffectState, Store
from ys.testing import WorkflowTest
from ys.values import StepWrite

OP = "charge.v1"

# -- strategies: tests/durable_values.py ---------------------------------------------------

# plain dicts that look like errors (tagged or not) must stay plain dicts
ERROR_SHAPED = [
    {"name": "ValueError", "message": "card declined", "code": "DECLINED"},
    {"$error": {"name": "ValueError", "message": "card declined"}},
    {"$$error": {"name": "x", "message": "y"}},
    {"status": "settled", "result": {"$error": {"name": "E", "message": "m"}}},
]


@pytest.fixture(scope="module", params=ADAPTERS, ids=lambda adapter: adapter.name)
def shared_store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """One store of each adapter (tests/store/adapters.py) for every example of a property
    (opening a database per example is slow)."""
    adapter: Adapter = request.param
    bind = getattr(adapter, "bind", None)
    if bind is not None:  # an adapter whose databases live on a server (PostgreSQL)
        bind(request)
    with tempfile.TemporaryDirectory(prefix="ys-effects-") as d:
        s = adapter.open(adapter.create(Path(d)), clock=lambda: T0)
        try:
            yield s
        finally:
            s.close()


_ids = itertools.count()


# -- round trips --------------------------------------------------------------------------------


@settings(
    max_examples=75, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=durable_values)
@example(value=ERROR_SHAPED[0])
@example(value=ERROR_SHAPED[1])
@example(value=ERROR_SHAPED[2])
@example(value=ERROR_SHAPED[3])
@example(value=ErrorValue("ValueError", "card declined", "DECLINED"))
@example(value=-0.0)
@example(value=[1, 1.0, True, "1", None])
@example(value=2**70)
@example(value=1e308)
def test_every_durable_value_round_trips_through_effect_input_and_result_in_the_store(
    shared_store: Store, value: Any
) -> None:
    effect_id = f"effect-{next(_ids)}"
    expected = normalized(value)
    assert shared_store.effect_begin(
        OP, effect_id, {"v": value}, "order-42", "charge", now=T0
    ) == EffectState("new")
    # the same input (as decoded) matches the stored one: nothing was lost in the encoding
    again = shared_store.effect_begin(OP, effect_id, {"v": expected}, "order-43", "charge", now=T0)
    assert again == EffectState("pending")
    described = shared_store.effect(effect_id)
    assert described is not None
    assert_same(described.input, {"v": expected})

    settled = shared_store.effect_settle(OP, effect_id, codec.dumps(value), now=T0)
    assert settled.status == "settled"
    state = shared_store.effect_begin(OP, effect_id, {"v": value}, "order-44", "charge", now=T0)
    assert state.status == "settled"
    assert_same(codec.decode(state.result_json), expected)


@settings(max_examples=100, deadline=None)
@given(value=durable_values)
@example(value=ERROR_SHAPED[0])
@example(value=ERROR_SHAPED[1])
@example(value=ErrorValue("ValueError", "card declined", "DECLINED"))
def test_every_durable_value_round_trips_through_the_driver_and_its_recorded_step(
    value: Any,
) -> None:
    client = FakeClient()
    provider = FakeProvider(client)
    provider.perform_script.append(lambda e: value)

    def main(step: ys.sdk.Step, params: Any) -> Any:
        got = step.effect(
            "charge",
            effect_id="eff",
            operation=OP,
            input={"v": value},
            perform=provider.perform,
            lookup=provider.lookup,
        )
        return {
            "type": type(got).__name__,
            "same": got == normalized(value) or (isinstance(value, float) and math.isnan(value)),
        }

    assert client.run(main)["result"]["type"] == type(normalized(value)).__name__
    assert_same(codec.decode(client.effects["eff"]["input"]), {"v": normalized(value)})
    # the recorded step gives the same value back on replay, with no client call
    client.calls.clear()
    seen: list[Any] = []

    def replay(step: ys.sdk.Step, params: Any) -> None:
        seen.append(
            step.effect(
                "charge",
                effect_id="eff",
                operation=OP,
                input={"v": value},
                perform=provider.perform,
                lookup=provider.lookup,
            )
        )

    client.run(replay, attempt=2)
    assert client.calls == []
    assert_same(seen[0], normalized(value))


@pytest.mark.parametrize("shaped", ERROR_SHAPED, ids=range(len(ERROR_SHAPED)))
def test_error_shaped_plain_dict_stays_a_plain_dict_through_lookup_settle_and_replay(
    shaped: dict[str, Any],
) -> None:
    client = FakeClient()
    provider = FakeProvider(client)
    client.pending("eff", input={"v": shaped})
    provider.lookup_script.append(lambda e: ys.Settled(shaped))
    got: list[Any] = []

    def main(step: ys.sdk.Step, params: Any) -> Any:
        got.append(
            step.effect(
                "charge",
                effect_id="eff",
                operation=OP,
                input={"v": shaped},
                perform=provider.perform,
                lookup=provider.lookup,
            )
        )

    client.run(main)
    client.run(main, attempt=2)
    for value in got:
        assert type(value) is dict
        assert_same(value, shaped)
    assert "$$" in client.effects["eff"]["result"] or "$" not in json.dumps(shaped)


# -- invalid values -----------------------------------------------------------------------------


class Opaque:
    pass


def _cycle() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["self"] = d
    return d


def _deep() -> list[Any]:
    v: list[Any] = []
    for _ in range(codec.MAX_DEPTH + 2):
        v = [v]
    return v


INVALID = {
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "set": {1, 2},
    "frozenset": frozenset([1]),
    "tuple": (1, 2),
    "bytes": b"x",
    "object": Opaque(),
    "int-key": {1: "x"},
    "cycle": _cycle(),
    "too-deep": _deep(),
    "surrogate": ["\udc80"],
    "huge-int": 10**5000,
    "callable": print,
    "Settled": ys.Settled(1),
    "error-with-bad-code": ErrorValue("E", "m", 5),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("value", list(INVALID.values()), ids=list(INVALID))
def test_invalid_values_are_refused_as_input_by_the_store_and_the_driver(
    shared_store: Store, value: Any
) -> None:
    effect_id = f"invalid-{next(_ids)}"
    with pytest.raises(WorkflowEffectError) as info:
        shared_store.effect_begin(OP, effect_id, {"v": value}, "order-42", "charge", now=T0)
    assert info.value.code == "INVALID_EFFECT_REQUEST"
    assert shared_store.effect(effect_id) is None

    client = FakeClient()
    provider = FakeProvider(client)

    def main(step: ys.sdk.Step, params: Any) -> Any:
        try:
            step.effect(
                "charge",
                effect_id=effect_id,
                operation=OP,
                input={"v": value},
                perform=provider.perform,
                lookup=provider.lookup,
            )
        except WorkflowEffectError as exc:
            return exc.code

    assert client.run(main) == {"status": "completed", "result": "INVALID_EFFECT_REQUEST"}
    assert client.names() == ["save"]


@pytest.mark.parametrize("value", list(INVALID.values()), ids=list(INVALID))
def test_invalid_values_are_refused_as_results_of_perform_and_lookup(value: Any) -> None:
    for via in ("perform", "lookup"):
        client = FakeClient()
        provider = FakeProvider(client)
        if via == "lookup":
            client.pending("eff", input={})
            provider.lookup_script.append(lambda e: ys.Settled(value))
        else:
            provider.perform_script.append(lambda e: value)

        def main(step: ys.sdk.Step, params: Any, provider: FakeProvider = provider) -> Any:
            return step.effect(
                "charge",
                effect_id="eff",
                operation=OP,
                input={},
                perform=provider.perform,
                lookup=provider.lookup,
            )

        with pytest.raises(InfrastructureFailure) as info:
            client.run(main)
        assert info.value.code == "EFFECT_HANDLER_INVALID"
        assert client.saved == {} and "settle" not in client.names()


def test_a_lone_surrogate_str_result_is_refused_as_an_invalid_callback_result() -> None:
    client = FakeClient()
    provider = FakeProvider(client)
    provider.perform_script.append(lambda e: "\udc80")

    def main(step: ys.sdk.Step, params: Any) -> Any:
        return step.effect(
            "charge",
            effect_id="eff",
            operation=OP,
            input={},
            perform=provider.perform,
            lookup=provider.lookup,
        )

    with pytest.raises(InfrastructureFailure) as info:
        client.run(main)
    assert info.value.code == "EFFECT_HANDLER_INVALID"


def test_a_result_too_big_to_save_is_refused_as_an_invalid_callback_result() -> None:
    client = FakeClient()
    provider = FakeProvider(client)
    provider.perform_script.append(lambda e: "z" * 10_000_000)

    def main(step: ys.sdk.Step, params: Any) -> Any:
        return step.effect(
            "charge",
            effect_id="eff",
            operation=OP,
            input={},
            perform=provider.perform,
            lookup=provider.lookup,
        )

    with pytest.raises(InfrastructureFailure) as info:
        client.run(main)
    assert info.value.code == "EFFECT_HANDLER_INVALID"
    assert "2 MiB" in str(info.value.cause)
    assert client.saved == {} and "settle" not in client.names()


# -- rejections keep their code through serialization -------------------------------------------


def test_workflow_effect_error_code_survives_serialization_of_the_recorded_step() -> None:
    client = FakeClient()
    provider = FakeProvider(client)
    client.pending("eff", operation="charge.v0")

    def main(step: ys.sdk.Step, params: Any) -> Any:
        return step.effect(
            "charge",
            effect_id="eff",
            operation=OP,
            input={"amount": 49.99},
            perform=provider.perform,
            lookup=provider.lookup,
        )

    client.run(main)
    saved = client.saved["charge"]
    # what a worker gets back from the API: plain JSON text, decoded again
    wire = json.loads(json.dumps({"status": saved.status, "value": saved.value}))
    error = codec.decode(wire["value"])
    assert isinstance(error, ErrorValue)
    assert (error.name, error.code) == ("WorkflowEffectError", "EFFECT_REQUEST_MISMATCH")
    revived = ys.sdk.revive(error)
    assert isinstance(revived, WorkflowEffectError)
    assert revived.code == "EFFECT_REQUEST_MISMATCH"


# -- a suspended effect step stays unfinished ---------------------------------------------------


def test_suspended_effect_step_stays_unfinished_after_serialization_and_replays_from_begin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = ["unknown", "settled"]  # (the first delivery performs)
    charge = {"charge_id": "ch_1", "amount": 49.99}

    def lookup(effect_id: str) -> Any:
        return ys.Settled(charge) if answers.pop(0) == "settled" else Unknown()

    def perform(effect_id: str) -> Any:
        raise TimeoutError("no answer from the provider")

    def main(step: ys.sdk.Step, params: Any) -> Any:
        return step.effect(
            "charge",
            effect_id="eff",
            operation=OP,
            input={"amount": 49.99},
            perform=perform,
            lookup=lookup,
            retry_in=30,
        )

    with WorkflowTest({"charge-order": main}, start=T0) as t:
        begins: list[str] = []
        real_begin = t.store.effect_begin

        def counting_begin(*args: Any, **kw: Any) -> Any:
            begins.append(args[1])
            return real_begin(*args, **kw)

        monkeypatch.setattr(t.store, "effect_begin", counting_begin)
        eid = t.trigger("charge-order", {})
        t.run()
        assert t.get(eid)["status"] == "suspended"
        (step,) = t.store.steps(eid)
        assert (step.kind, step.status, step.value, step.wake_at) == (
            "effect",
            "waiting",
            None,
            T0 + 30,
        )

        # serialized as a worker receives it (GET .../run) and deserialized into a StepWrite
        wire = json.loads(
            json.dumps(
                {
                    "key": step.key,
                    "kind": step.kind,
                    "status": step.status,
                    "value": step.value,
                    "attempts": step.attempts,
                    "wake_at": step.wake_at,
                }
            )
        )
        saved = StepWrite(
            wire["kind"], wire["status"], wire.get("value"), wire["attempts"], wire.get("wake_at")
        )
        assert saved.status == "waiting"  # unfinished, not a result

        # each later delivery starts the effect step again from begin
        t.advance(30)
        t.run()
        assert t.get(eid)["status"] == "suspended"
        t.advance(30)
        t.run()
        record = t.get(eid)
        assert record["status"] == "completed"
        assert record["outcome"]["result"] == charge
        assert begins == ["eff", "eff", "eff"]
        assert [s.status for s in t.store.steps(eid)] == ["completed"]
