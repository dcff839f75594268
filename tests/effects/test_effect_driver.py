"""RFC 004's workflow-driver table: `Step.effect` driven by `run_workflow` over a fake
EffectClient (FakeClient) and fake perform/lookup callbacks (FakeProvider), both recording
their calls in one ordered list.

An interruption ("the worker dies here") is simulated by raising Crash, a BaseException
nothing catches, at that point (from a callback, or from `ys.sdk.crash_point` patched to raise
at one named point); the next delivery is a new Step over the steps saved so far.

| Path or interruption                                   | Observable outcome                  |
| new effect                                             | begin, perform, settle in order      |
| pending effect with not-found                          | begin, lookup, perform, settle       |
| already-settled effect                                 | no callback; the recorded result     |
| during perform, after external completion or response  | lookup runs before another perform   |
| after lookup returns not-found                         | lookup runs again before perform     |
| after lookup returns settled but before settle         | lookup again; the same result stored |
| after settle but before the step result                | the effect record supplies it        |
| after the step result but before continuation          | the recorded step supplies it        |
| lookup returns unknown or a callback rejects           | wait completes before the suspension |
| invalid request                                        | INVALID_EFFECT_REQUEST, no client    |
| changed operation or input                             | EFFECT_REQUEST_MISMATCH, no callback |
| client availability failure                            | no step; EFFECT_CLIENT_UNAVAILABLE   |
| malformed lookup or invalid callback result            | no step; fails EFFECT_HANDLER_INVALID|
| client invariant                                       | no step; EFFECT_RUNTIME_INVARIANT    |
| conflicting settlement                                 | reported; the first result recorded  |
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from effects_support import T0, Crash, FakeClient, FakeProvider, NotFound, Settled, Unknown

import ys.sdk
from ys import codec
from ys.errors import (
    DaemonUnavailable,
    EffectInvariantError,
    ResourceExhausted,
    WorkflowEffectError,
    YsError,
)
from ys.sdk import InfrastructureFailure

OP = "charge.v1"
EID = "shop:charge:order-42"
INPUT = {"amount": 49.99}
CHARGE = {"charge_id": "ch_1", "amount": 49.99}


@pytest.fixture
def client() -> FakeClient:
    return FakeClient()


@pytest.fixture
def provider(client: FakeClient) -> FakeProvider:
    return FakeProvider(client)


def charge_order(
    provider: FakeProvider, then: Callable[[], Any] | None = None, **overrides: Any
) -> Callable[..., Any]:
    """The workflow: one effect step `charge`, then (optionally) `then()` as its continuation."""
    kw: dict[str, Any] = dict(
        effect_id=EID,
        operation=OP,
        input=INPUT,
        perform=provider.perform,
        lookup=provider.lookup,
        retry_in=60,
    )
    kw.update(overrides)

    def main(step: ys.sdk.Step, params: Any) -> Any:
        receipt = step.effect("charge", **kw)
        if then is not None:
            then()
        return receipt

    return main


@pytest.fixture
def crash_at(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """`crash_at("effect.after_perform")`: the next time the driver reaches that crash point,
    the worker "dies" (Crash is raised); later deliveries pass it."""

    def arm(point: str) -> None:
        armed = [point]

        def crash_point(name: str) -> None:
            if name in armed:
                armed.remove(name)
                raise Crash(name)

        monkeypatch.setattr(ys.sdk, "crash_point", crash_point)

    return arm


def interrupted(client: FakeClient, fn: Callable[..., Any]) -> list[tuple[Any, ...]]:
    """Run one delivery that dies with Crash; return its calls and clear the log."""
    with pytest.raises(Crash):
        client.run(fn)
    calls = list(client.calls)
    client.calls.clear()
    return calls


def completed(outcome: dict[str, Any], result: Any = CHARGE) -> None:
    assert outcome == {"status": "completed", "result": result}


# -- paths --------------------------------------------------------------------------------------


def test_new_effect_runs_begin_perform_and_settle_in_order(
    client: FakeClient, provider: FakeProvider
) -> None:
    completed(client.run(charge_order(provider)))
    assert client.names() == ["begin", "perform", "settle", "save"]
    assert client.calls[2] == ("settle", EID, codec.dumps(CHARGE))
    assert client.calls[3] == ("save", "charge", "completed")
    assert client.saved["charge"].value == codec.dumps(CHARGE)
    assert client.effects[EID]["status"] == "settled"


def test_pending_effect_with_not_found_runs_begin_lookup_perform_and_settle_in_order(
    client: FakeClient, provider: FakeProvider
) -> None:
    client.pending(EID)
    completed(client.run(charge_order(provider)))
    assert client.names() == ["begin", "lookup", "perform", "settle", "save"]
    assert client.calls[1] == ("lookup", EID, "NotFound")


def test_already_settled_effect_runs_no_callback_and_returns_the_recorded_result(
    client: FakeClient, provider: FakeProvider
) -> None:
    client.pending(EID)
    client.settle(EID, codec.dumps({"charge_id": "ch_elsewhere", "amount": 49.99}))
    outcome = client.run(charge_order(provider))
    completed(outcome, {"charge_id": "ch_elsewhere", "amount": 49.99})
    assert client.names() == ["begin", "save"]
    assert provider.charges == {}


def test_pending_effect_with_lookup_settled_stores_that_result_without_performing(
    client: FakeClient, provider: FakeProvider
) -> None:
    client.pending(EID)
    provider.charge(EID)  # an earlier attempt charged; its response was lost
    completed(client.run(charge_order(provider)))
    assert client.names() == ["begin", "lookup", "settle", "save"]


# -- interruptions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "when", ["during perform", "after external completion", "after its response"]
)
def test_interrupted_perform_is_followed_by_lookup_before_another_perform(
    client: FakeClient, provider: FakeProvider, crash_at: Callable[[str], None], when: str
) -> None:
    if when == "during perform":  # dies before the provider accepted anything
        provider.perform_script.append(Crash("during perform"))
    elif when == "after external completion":  # the provider charged; no response came back

        def charged_then_died(effect_id: str) -> Any:
            provider.charge(effect_id)
            raise Crash("after external completion")

        provider.perform_script.append(charged_then_died)
    else:  # perform returned; the worker died before settle
        crash_at("effect.after_perform")
    first = interrupted(client, charge_order(provider))
    assert [c[0] for c in first] == ["begin", "perform"]
    assert client.saved == {}

    completed(client.run(charge_order(provider), attempt=2))
    names = client.names()
    assert names[:2] == ["begin", "lookup"]
    if when == "during perform":
        assert names == ["begin", "lookup", "perform", "settle", "save"]
    else:
        assert names == ["begin", "lookup", "settle", "save"]  # no second perform
    assert len(provider.charges) == 1


def test_interrupted_after_lookup_not_found_runs_lookup_again_before_perform(
    client: FakeClient, provider: FakeProvider, crash_at: Callable[[str], None]
) -> None:
    client.pending(EID)
    crash_at("effect.after_lookup")
    first = interrupted(client, charge_order(provider))
    assert first == [("begin", EID), ("lookup", EID, "NotFound")]

    completed(client.run(charge_order(provider), attempt=2))
    assert client.names() == ["begin", "lookup", "perform", "settle", "save"]


def test_interrupted_after_lookup_settled_before_settle_looks_up_again_and_stores_the_same_result(
    client: FakeClient, provider: FakeProvider, crash_at: Callable[[str], None]
) -> None:
    client.pending(EID)
    provider.charge(EID)
    crash_at("effect.after_lookup")
    first = interrupted(client, charge_order(provider))
    assert first == [("begin", EID), ("lookup", EID, "Settled")]
    assert client.effects[EID]["status"] == "pending"

    completed(client.run(charge_order(provider), attempt=2))
    assert client.names() == ["begin", "lookup", "settle", "save"]
    assert client.effects[EID]["result"] == codec.dumps(CHARGE)
    assert client.saved["charge"].value == codec.dumps(CHARGE)


def test_interrupted_after_settle_before_the_step_result_takes_the_result_from_the_effect_record(
    client: FakeClient, provider: FakeProvider, crash_at: Callable[[str], None]
) -> None:
    crash_at("effect.after_settle")
    first = interrupted(client, charge_order(provider))
    assert [c[0] for c in first] == ["begin", "perform", "settle"]
    assert client.saved == {}

    completed(client.run(charge_order(provider), attempt=2))
    assert client.names() == ["begin", "save"]  # no external call
    assert len(provider.charges) == 1


def test_interrupted_after_the_step_result_before_continuation_replays_the_recorded_step(
    client: FakeClient, provider: FakeProvider
) -> None:
    died = []

    def continuation() -> None:
        if not died:
            died.append(True)
            raise Crash("after the step result")

    first = interrupted(client, charge_order(provider, then=continuation))
    assert [c[0] for c in first] == ["begin", "perform", "settle", "save"]

    completed(client.run(charge_order(provider, then=continuation), attempt=2))
    assert client.calls == []  # neither the client nor a callback


def test_recorded_step_returns_without_the_client_even_if_the_effect_record_disagrees(
    client: FakeClient, provider: FakeProvider
) -> None:
    completed(client.run(charge_order(provider)))
    client.calls.clear()
    client.effects.clear()  # the step record alone answers
    completed(client.run(charge_order(provider), attempt=2))
    assert client.calls == []


# -- unknown outcomes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case", ["lookup unknown", "lookup rejects", "lookup rejects async", "perform rejects"]
)
def test_unknown_outcome_completes_wait_before_the_step_suspends(
    client: FakeClient, provider: FakeProvider, case: str
) -> None:
    if case == "perform rejects":
        provider.perform_script.append(ConnectionError("provider timed out"))
    else:
        client.pending(EID)
        if case == "lookup unknown":
            provider.lookup_script.append(lambda effect_id: Unknown())
        elif case == "lookup rejects":
            provider.lookup_script.append(TimeoutError("provider timed out"))
        else:

            async def rejects(effect_id: str) -> Any:
                raise TimeoutError("provider timed out")

            provider.lookup_script.append(lambda effect_id: rejects(effect_id))

    assert client.run(charge_order(provider, retry_in=30)) == {"status": "suspended"}
    names = client.names()
    assert names[-2:] == ["wait", "save"]  # the wait completed before the unfinished record
    assert client.calls[-2] == ("wait", EID, T0 + 30)
    assert client.calls[-1] == ("save", "charge", "waiting")
    saved = client.saved["charge"]
    assert (saved.status, saved.value, saved.wake_at) == ("waiting", None, T0 + 30)
    assert client.effects[EID]["status"] == "pending"  # nothing settled

    # the next delivery starts again from begin and, once the provider knows, completes
    client.calls.clear()
    client.clock = T0 + 30
    if case == "perform rejects":
        provider.charge(EID)  # the timed-out call had landed after all
    completed(
        client.run(charge_order(provider, retry_in=30), attempt=2),
        provider.charges.get(EID, CHARGE),
    )
    assert client.names()[:2] == ["begin", "lookup"]
    assert len(provider.charges) == 1


def test_interrupted_after_wait_before_the_unfinished_record_repeats_wait_for_the_first_wake(
    client: FakeClient, provider: FakeProvider, crash_at: Callable[[str], None]
) -> None:
    client.pending(EID)
    provider.lookup_script += [lambda e: Unknown(), lambda e: Unknown()]
    crash_at("effect.after_wait")
    first = interrupted(client, charge_order(provider, retry_in=60))
    assert [c[0] for c in first] == ["begin", "lookup", "wait"]
    assert client.saved == {}

    client.clock = T0 + 5
    assert client.run(charge_order(provider, retry_in=60), attempt=2) == {"status": "suspended"}
    assert client.names() == ["begin", "lookup", "wait", "save"]
    assert client.saved["charge"].wake_at == T0 + 60  # the first registration's wake


# -- rejections that reach workflow code --------------------------------------------------------


def catching(provider: FakeProvider, **overrides: Any) -> Callable[..., Any]:
    """A workflow that catches WorkflowEffectError and returns its code."""
    inner = charge_order(provider, **overrides)

    def main(step: ys.sdk.Step, params: Any) -> Any:
        try:
            return inner(step, params)
        except WorkflowEffectError as exc:
            return {"caught": exc.code}

    return main


@pytest.mark.parametrize(
    "overrides",
    [
        {"effect_id": ""},
        {"effect_id": 42},
        {"effect_id": "line\nbreak"},
        {"effect_id": "x" * 257},
        {"operation": ""},
        {"operation": None},
        {"input": [49.99]},
        {"input": None},
        {"input": {"amount": float("nan")}},
        {"input": {"amount": math.inf}},
        {"input": {"when": {1, 2}}},
        {"input": {1: "x"}},
        {"retry_in": -1},
        {"retry_in": math.inf},
        {"retry_in": math.nan},
        {"retry_in": True},
        {"retry_in": "60"},
        {"perform": None},
        {"lookup": "not callable"},
    ],
    ids=lambda o: f"{next(iter(o))}={next(iter(o.values()))!r}"[:40],
)
def test_invalid_request_records_invalid_effect_request_for_workflow_code_without_the_client(
    client: FakeClient, provider: FakeProvider, overrides: dict[str, Any]
) -> None:
    outcome = client.run(catching(provider, **overrides))
    assert outcome == {"status": "completed", "result": {"caught": "INVALID_EFFECT_REQUEST"}}
    assert client.calls == [("save", "charge", "failed")]  # no begin, no callback
    error = codec.decode(client.saved["charge"].value or "null")
    assert isinstance(error, codec.ErrorValue)
    assert (error.name, error.code) == ("WorkflowEffectError", "INVALID_EFFECT_REQUEST")

    # replay raises the recorded error again, still without the client
    client.calls.clear()
    assert client.run(catching(provider, **overrides), attempt=2) == outcome
    assert client.calls == []


def test_uncaught_invalid_request_fails_the_workflow_with_its_code(
    client: FakeClient, provider: FakeProvider
) -> None:
    outcome = client.run(charge_order(provider, retry_in=-5))
    assert outcome["status"] == "failed"
    assert outcome["error"]["name"] == "WorkflowEffectError"
    assert outcome["error"]["code"] == "INVALID_EFFECT_REQUEST"


@pytest.mark.parametrize("settled", [False, True], ids=["pending", "settled"])
@pytest.mark.parametrize(
    "change", [{"operation": "charge.v2"}, {"input": {"amount": 59.99}}], ids=["operation", "input"]
)
def test_changed_operation_or_input_records_mismatch_for_workflow_code_without_a_callback(
    client: FakeClient, provider: FakeProvider, change: dict[str, Any], settled: bool
) -> None:
    client.pending(EID)  # begun by the old code
    if settled:
        client.settle(EID, codec.dumps(CHARGE))
    outcome = client.run(catching(provider, **change))
    assert outcome == {"status": "completed", "result": {"caught": "EFFECT_REQUEST_MISMATCH"}}
    assert client.calls == [("begin", EID), ("save", "charge", "failed")]
    error = codec.decode(client.saved["charge"].value or "null")
    assert (error.name, error.code) == ("WorkflowEffectError", "EFFECT_REQUEST_MISMATCH")
    assert client.effects[EID]["status"] == ("settled" if settled else "pending")

    client.calls.clear()
    assert client.run(catching(provider, **change), attempt=2) == outcome
    assert client.calls == []  # the recorded rejection, raised again


# -- failures that request another delivery -----------------------------------------------------


def unavailable_errors() -> list[BaseException]:
    return [
        OSError("connection reset"),
        ConnectionRefusedError("no daemon"),
        DaemonUnavailable("DAEMON_UNAVAILABLE", "nothing answers"),
        ResourceExhausted("RESOURCE_EXHAUSTED", "disk full"),
        YsError("INTERNAL", "500 from the daemon"),
        KeyError("status"),
    ]


def prepare(client: FakeClient, provider: FakeProvider, method: str) -> None:
    """Reach `method` on the first delivery: settle after a perform, wait after unknown."""
    if method == "wait":
        client.pending(EID)
        provider.lookup_script.append(lambda e: Unknown())


@pytest.mark.parametrize("method", ["begin", "settle", "wait"])
@pytest.mark.parametrize("error", unavailable_errors(), ids=lambda e: type(e).__name__)
def test_client_availability_failure_records_no_step_and_retries_with_client_unavailable(
    client: FakeClient, provider: FakeProvider, method: str, error: BaseException
) -> None:
    prepare(client, provider, method)
    client.script[method] = [error]
    with pytest.raises(InfrastructureFailure) as info:
        client.run(charge_order(provider))
    assert info.value.code == "EFFECT_CLIENT_UNAVAILABLE"
    assert info.value.cause is error
    assert "save" not in client.names()
    assert client.saved == {}

    # the retried delivery completes, charging once
    client.calls.clear()
    completed(client.run(charge_order(provider), attempt=2), provider.charges.get(EID, CHARGE))
    assert len(provider.charges) == 1


@pytest.mark.parametrize(
    "case",
    [
        "lookup returns a plain dict",
        "lookup returns None",
        "lookup returns a charge",
        "lookup settles a set",
        "perform returns a set",
        "perform returns a tuple",
        "perform returns NaN",
        "perform returns Settled",
    ],
)
def test_malformed_lookup_or_invalid_callback_result_records_no_step_and_keeps_the_effect_pending(
    client: FakeClient, provider: FakeProvider, case: str
) -> None:
    what, _, answer = case.partition(" returns ")
    if case.startswith("lookup"):
        client.pending(EID)
        value: Any = {
            "lookup returns a plain dict": {"status": "settled", "result": CHARGE},
            "lookup returns None": None,
            "lookup returns a charge": CHARGE,
            "lookup settles a set": Settled({"ch_1"}),
        }[case]
        provider.lookup_script.append(lambda e: value)
    else:
        value = {
            "perform returns a set": {"ch_1"},
            "perform returns a tuple": ("ch_1", 49.99),
            "perform returns NaN": {"amount": math.nan},
            "perform returns Settled": Settled(CHARGE),
        }[case]
        provider.perform_script.append(lambda e: value)

    outcome = client.run(charge_order(provider))  # no delivery can change it: it fails
    assert outcome["status"] == "failed"
    assert outcome["error"]["code"] == "EFFECT_HANDLER_INVALID"
    assert client.saved == {}
    assert "settle" not in client.names() and "wait" not in client.names()
    assert client.effects[EID]["status"] == "pending"


@pytest.mark.parametrize("method", ["begin", "settle", "wait"])
def test_client_invariant_records_no_step_and_retries_with_runtime_invariant(
    client: FakeClient, provider: FakeProvider, method: str
) -> None:
    prepare(client, provider, method)
    client.script[method] = [
        EffectInvariantError("EFFECT_RUNTIME_INVARIANT", "effect record is corrupt")
    ]
    with pytest.raises(InfrastructureFailure) as info:
        client.run(charge_order(provider))
    assert info.value.code == "EFFECT_RUNTIME_INVARIANT"
    assert client.saved == {}


@pytest.mark.parametrize(
    "method, answer",
    [
        ("begin", {"status": "bogus"}),
        ("begin", {}),
        ("begin", {"status": "settled"}),
        ("begin", {"status": "settled", "result": "{not canonical"}),
        ("settle", {"status": "settled"}),
        ("settle", {"status": "bogus", "result": "1"}),
        ("settle", {"status": "conflict", "result": "NaN", "conflicting_result": "1"}),
    ],
    ids=lambda v: str(v)[:30],
)
def test_invalid_answer_from_the_client_is_a_runtime_invariant_that_performs_and_records_nothing(
    client: FakeClient, provider: FakeProvider, method: str, answer: dict[str, Any]
) -> None:
    client.script[method] = [answer]
    with pytest.raises(InfrastructureFailure) as info:
        client.run(charge_order(provider))
    assert info.value.code == "EFFECT_RUNTIME_INVARIANT"
    assert client.saved == {}
    if method == "begin":
        assert client.names() == ["begin"]  # never performs on an answer it cannot read


def test_conflicting_settlement_is_reported_and_the_first_result_recorded_and_returned(
    client: FakeClient, provider: FakeProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = {"charge_id": "ch_other_runtime", "amount": 49.99}

    def performed_while_another_runtime_settled(effect_id: str) -> Any:
        client.settle(effect_id, codec.dumps(elsewhere))  # another runtime settled first
        return CHARGE

    provider.perform_script.append(performed_while_another_runtime_settled)
    completed(client.run(charge_order(provider)), elsewhere)
    assert client.names() == ["begin", "perform", "settle", "save"]
    assert client.saved["charge"].value == codec.dumps(elsewhere)
    assert client.conflicts == [(EID, codec.dumps(elsewhere), codec.dumps(CHARGE))]
    err = capsys.readouterr().err
    assert "EFFECT_CONFLICT" in err and EID in err


def test_workflow_code_cannot_catch_the_failures_that_request_another_delivery(
    client: FakeClient, provider: FakeProvider
) -> None:
    client.script["begin"] = [OSError("connection reset")]
    inner = charge_order(provider)

    def main(step: ys.sdk.Step, params: Any) -> Any:
        try:
            return inner(step, params)
        except Exception:  # noqa: BLE001 - the point: it does not catch the failure
            return "swallowed"

    with pytest.raises(InfrastructureFailure):
        client.run(main)
    assert client.saved == {}


def test_a_new_effect_in_a_waiting_step_is_not_begun_twice_in_one_run(
    client: FakeClient, provider: FakeProvider
) -> None:
    def twice(step: ys.sdk.Step, params: Any) -> Any:
        kw: dict[str, Any] = dict(
            effect_id=EID,
            operation=OP,
            input=INPUT,
            perform=provider.perform,
            lookup=provider.lookup,
        )
        step.effect("charge", **kw)
        return step.effect("charge", **kw)

    outcome = client.run(twice)
    assert outcome["status"] == "failed"
    assert "DUPLICATE_STEP_KEY" in outcome["error"]["code"]
    assert client.names() == ["begin", "perform", "settle", "save"]


def test_step_key_and_effect_id_are_independent(client: FakeClient, provider: FakeProvider) -> None:
    """Two steps naming one payment (one effect ID) charge once; both read the same result."""

    def main(step: ys.sdk.Step, params: Any) -> Any:
        kw: dict[str, Any] = dict(
            effect_id=EID,
            operation=OP,
            input=INPUT,
            perform=provider.perform,
            lookup=provider.lookup,
        )
        return [step.effect("charge", **kw), step.effect("check", **kw)]

    completed(client.run(main), [CHARGE, CHARGE])
    assert client.names() == ["begin", "perform", "settle", "save", "begin", "save"]


def test_settled_lookup_results_and_performed_results_are_stored_in_canonical_form(
    client: FakeClient, provider: FakeProvider
) -> None:
    provider.perform_script.append(lambda e: {"b": [1, -0.0], "a": "x"})
    completed(client.run(charge_order(provider)), {"a": "x", "b": [1, 0.0]})
    assert client.calls[2] == ("settle", EID, '{"a":"x","b":[1,0.0]}')


def test_not_found_lookup_type_is_the_sdk_class(provider: FakeProvider) -> None:
    assert ys.NotFound is NotFound and ys.Settled is Settled and ys.Unknown is Unknown
