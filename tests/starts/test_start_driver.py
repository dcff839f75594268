"""RFC 003, workflow-driver table: `Step.start` (and `Step.call`) driven by a FAKE start client.

Each test runs a workflow through `ys.sdk.run_workflow` with a `Step` whose backend is
FakeBackend, then inspects the calls the fake received and the steps it recorded. A "next
attempt" is a new Step built from the recorded steps, as a redelivery would build it.
"""

from __future__ import annotations

from typing import Any

import pytest
from starts_support import FakeBackend

import ys
import ys.sdk
from ys import codec
from ys.errors import DaemonUnavailable, WorkflowStartError, YsError
from ys.sdk import InfrastructureFailure

PARAMS = {"order": 42}


def ship(step: ys.Step, params: dict[str, Any]) -> Any:
    child = step.start("ship", params.get("workflow", "ship-order"), params.get("params", PARAMS))
    return {"child": child}


def ship_catching(step: ys.Step, params: dict[str, Any]) -> Any:
    try:
        child = step.start(
            "ship", params.get("workflow", "ship-order"), params.get("params", PARAMS)
        )
    except WorkflowStartError as exc:
        return {"caught": type(exc).__name__, "code": exc.code}
    return {"child": child}


def ship_swallowing_everything(step: ys.Step, params: dict[str, Any]) -> Any:
    try:
        return {"child": step.start("ship", "ship-order", PARAMS)}
    except Exception as exc:  # noqa: BLE001 - the point: this must not see the client's error
        return {"swallowed": type(exc).__name__}


def _saved_error(fake: FakeBackend, key: str) -> codec.ErrorValue:
    saved = fake.saved[key]
    assert (saved.kind, saved.status) == ("start", "failed")
    err = codec.decode(saved.value or "null")
    assert isinstance(err, codec.ErrorValue)
    return err


# -- the table ---------------------------------------------------------------------------------


def test_returns_accepted_records_and_returns_the_execution_id_and_replay_makes_no_call():
    fake = FakeBackend()
    outcome = fake.run(ship)
    assert outcome == {"status": "completed", "result": {"child": "ship-order-1"}}
    assert fake.calls == [(("order-42", "ship"), "ship-order", PARAMS, False)]
    assert fake.save_log == [("ship", "start", "completed")]
    recorded = codec.decode(fake.saved["ship"].value or "null")
    assert recorded["execution_id"] == "ship-order-1"
    assert (recorded["workflow"], recorded["params"]) == ("ship-order", '{"order":42}')

    # replay (a later delivery): the recorded ID, no client call, nothing recorded again
    assert fake.run(ship, attempt=2) == outcome
    assert len(fake.calls) == 1
    assert fake.save_log == [("ship", "start", "completed")]


@pytest.mark.parametrize("code", ["START_REQUEST_MISMATCH", "INVALID_START_PARAMETERS"])
def test_returns_rejected_records_and_throws_workflow_start_error_and_replay_restores_it(code: str):
    fake = FakeBackend()
    fake.script = [WorkflowStartError(code, "refused by the start client")]
    caught = fake.run(ship_catching)
    assert caught == {
        "status": "completed",
        "result": {"caught": "WorkflowStartError", "code": code},
    }
    assert len(fake.calls) == 1
    err = _saved_error(fake, "ship")
    assert (err.name, err.code, err.message) == (
        "WorkflowStartError",
        code,
        "refused by the start client",
    )

    # replay: the same class and code, thrown again, without a client call
    assert fake.run(ship_catching, attempt=2) == caught
    step = fake.step(attempt=3)
    with pytest.raises(WorkflowStartError) as exc:
        step.start("ship", "ship-order", PARAMS)
    assert type(exc.value) is WorkflowStartError and exc.value.code == code
    assert len(fake.calls) == 1

    # uncaught, it is the workflow's failed outcome, with its name and code
    failed = fake.run(ship, attempt=4)
    assert failed["status"] == "failed"
    assert (failed["error"]["name"], failed["error"]["code"]) == ("WorkflowStartError", code)
    assert len(fake.calls) == 1


@pytest.mark.parametrize(
    "params", [{"amount": float("nan")}, {"tags": {"a"}}, ["x"]], ids=["nan", "set", "not-a-dict"]
)
def test_returns_invalid_start_parameters_records_and_throws_after_one_client_call(params: Any):
    fake = FakeBackend()
    outcome = fake.run(ship_catching, {"params": params})
    assert outcome["result"] == {"caught": "WorkflowStartError", "code": "INVALID_START_PARAMETERS"}
    assert len(fake.calls) == 1
    assert fake.requests == {}  # the client admitted nothing
    assert _saved_error(fake, "ship").code == "INVALID_START_PARAMETERS"
    assert fake.run(ship_catching, {"params": params}, attempt=2) == outcome
    assert len(fake.calls) == 1


def test_an_invalid_workflow_name_is_recorded_and_replays_as_the_same_class_and_code():
    fake = FakeBackend()
    outcome = fake.run(ship_catching, {"workflow": "no such/workflow"})
    assert outcome["result"]["caught"] == "WorkflowStartError"
    code = outcome["result"]["code"]
    assert len(fake.calls) == 1
    assert fake.run(ship_catching, {"workflow": "no such/workflow"}, attempt=2) == outcome
    assert len(fake.calls) == 1
    assert code == _saved_error(fake, "ship").code


@pytest.mark.parametrize(
    "error",
    [
        OSError("connection refused"),
        ConnectionResetError("connection reset"),
        DaemonUnavailable("DAEMON_UNAVAILABLE", "no daemon answers"),
        YsError("INTERNAL", "internal error"),
        ValueError("malformed response"),
        RuntimeError("a bug in the client"),
    ],
    ids=["oserror", "reset", "daemon-unavailable", "internal", "valueerror", "runtimeerror"],
)
def test_throws_records_no_step_cannot_be_caught_and_the_next_attempt_calls_again(
    error: BaseException,
):
    fake = FakeBackend()
    fake.script = [error]
    with pytest.raises(InfrastructureFailure) as exc:
        fake.run(ship_swallowing_everything)
    assert exc.value.cause is error  # not an outcome: the delivery is retried
    assert fake.saved == {} and fake.save_log == []
    # the next execution attempt calls the client again, with the same request ID
    outcome = fake.run(ship_swallowing_everything, attempt=2)
    assert outcome == {"status": "completed", "result": {"child": "ship-order-1"}}
    assert [c[0] for c in fake.calls] == [("order-42", "ship")] * 2
    assert fake.calls[0] == fake.calls[1]
    assert fake.save_log == [("ship", "start", "completed")]


def test_caller_stops_after_accepted_before_recording_then_repeats_the_request_id_and_records_the_first_id():  # noqa: E501
    fake = FakeBackend()
    fake.fail_saves = 1  # the client accepted; recording the step fails (the caller stops)
    with pytest.raises(InfrastructureFailure):
        fake.run(ship)
    assert fake.saved == {}
    first_id = fake.requests[("order-42", "ship")][2]

    outcome = fake.run(ship, attempt=2)
    assert outcome == {"status": "completed", "result": {"child": first_id}}
    assert [c[0] for c in fake.calls] == [("order-42", "ship")] * 2
    assert codec.decode(fake.saved["ship"].value or "null")["execution_id"] == first_id
    assert len(fake.requests) == 1


def test_caller_killed_at_the_crash_point_repeats_the_request_id_and_records_the_first_id(
    monkeypatch: pytest.MonkeyPatch,
):
    class Killed(BaseException):
        """The process dies here (SIGKILL): nothing after this point runs."""

    def crash_once(name: str, fired: list[str] = []) -> None:  # noqa: B006
        if name == "start.after_client" and not fired:
            fired.append(name)
            raise Killed(name)

    monkeypatch.setattr(ys.sdk, "crash_point", crash_once)
    fake = FakeBackend()
    with pytest.raises(Killed):
        fake.run(ship)
    assert fake.saved == {} and len(fake.calls) == 1
    first_id = fake.requests[("order-42", "ship")][2]
    assert fake.run(ship, attempt=2)["result"] == {"child": first_id}
    assert fake.calls[0] == fake.calls[1]
    assert codec.decode(fake.saved["ship"].value or "null")["execution_id"] == first_id


# -- deployed new code (replay with a different request) ---------------------------------------


@pytest.mark.parametrize(
    "change",
    [{"workflow": "ship-express"}, {"params": {"order": 43}}, {"params": None}],
    ids=["workflow", "params", "no-params"],
)
def test_a_recorded_start_replayed_with_a_changed_request_raises_mismatch_without_a_call(
    change: dict[str, Any],
):
    fake = FakeBackend()
    assert fake.run(ship)["status"] == "completed"
    recorded = fake.saved["ship"]
    outcome = fake.run(ship_catching, change, attempt=2)
    assert outcome["result"] == {"caught": "WorkflowStartError", "code": "START_REQUEST_MISMATCH"}
    assert len(fake.calls) == 1  # no client call: the recorded step decides
    assert fake.saved["ship"] == recorded  # the recorded start is unchanged
    # the unchanged code still replays to the original target
    assert fake.run(ship, attempt=3)["result"] == {"child": "ship-order-1"}


def test_an_unrecorded_start_replayed_with_a_changed_request_records_the_clients_mismatch():
    fake = FakeBackend()
    fake.fail_saves = 1  # first attempt: accepted, not recorded
    with pytest.raises(InfrastructureFailure):
        fake.run(ship)
    # new code: ship-express under the same step key; the client refuses it
    outcome = fake.run(ship_catching, {"workflow": "ship-express"}, attempt=2)
    assert outcome["result"] == {"caught": "WorkflowStartError", "code": "START_REQUEST_MISMATCH"}
    assert [c[1] for c in fake.calls] == ["ship-order", "ship-express"]
    assert _saved_error(fake, "ship").code == "START_REQUEST_MISMATCH"
    # it is recorded: replay throws it again without calling the client
    assert fake.run(ship_catching, {"workflow": "ship-express"}, attempt=3) == outcome
    assert len(fake.calls) == 2
    assert len(fake.requests) == 1


# -- step.call reuses the request identity and the mismatch rules ------------------------------


def call_child(step: ys.Step, params: dict[str, Any]) -> Any:
    try:
        return {
            "result": step.call(
                "quote", params.get("workflow", "quote-order"), params.get("params", PARAMS)
            )
        }
    except ys.ChildWorkflowFailed as exc:
        return {
            "child_failed": exc.name,
            "message": exc.context.get("child_message"),
            "child": exc.child_id,
        }
    except WorkflowStartError as exc:
        return {"start_error": exc.code}


def test_call_waits_for_the_child_then_returns_its_result_without_starting_it_again():
    fake = FakeBackend()
    assert fake.run(call_child) == {"status": "suspended"}
    assert fake.save_log == [("quote", "call", "waiting")]
    child = fake.requests[("order-42", "quote")][2]
    assert fake.run(call_child, attempt=2) == {"status": "suspended"}  # still running
    fake.end(child, {"status": "completed", "result": {"price": 10}})
    assert fake.run(call_child, attempt=3) == {
        "status": "completed",
        "result": {"result": {"price": 10}},
    }
    assert len(fake.calls) == 1  # started once; later attempts read the recorded request
    assert fake.save_log[-1] == ("quote", "call", "completed")
    assert fake.run(call_child, attempt=4)["result"] == {"result": {"price": 10}}
    assert len(fake.calls) == 1


def test_call_of_a_failing_child_raises_child_workflow_failed_also_on_replay():
    fake = FakeBackend()
    fake.run(call_child)
    child = fake.requests[("order-42", "quote")][2]
    fake.end(
        child,
        {"status": "failed", "error": {"name": "OutOfStock", "message": "no stock for order 42"}},
    )
    expected = {"child_failed": "OutOfStock", "message": "no stock for order 42", "child": child}
    assert fake.run(call_child, attempt=2)["result"] == expected
    assert fake.save_log[-1] == ("quote", "call", "failed")
    assert fake.run(call_child, attempt=3)["result"] == expected
    assert len(fake.calls) == 1


def test_call_whose_start_is_rejected_throws_workflow_start_error_also_on_replay():
    fake = FakeBackend()
    outcome = fake.run(call_child, {"params": {"x": float("nan")}})
    assert outcome["result"] == {"start_error": "INVALID_START_PARAMETERS"}
    assert len(fake.calls) == 1
    # replay restores the same class and code (not ChildWorkflowFailed), without a call
    assert fake.run(call_child, {"params": {"x": float("nan")}}, attempt=2) == outcome
    assert len(fake.calls) == 1


def test_call_replayed_with_a_changed_request_raises_mismatch_without_a_call():
    fake = FakeBackend()
    fake.run(call_child)  # waiting on its child
    outcome = fake.run(call_child, {"workflow": "quote-express"}, attempt=2)
    assert outcome["result"] == {"start_error": "START_REQUEST_MISMATCH"}
    assert len(fake.calls) == 1


def test_call_client_failure_is_not_catchable_and_records_nothing():
    fake = FakeBackend()
    fake.script = [OSError("socket closed")]
    with pytest.raises(InfrastructureFailure):
        fake.run(call_child)
    assert fake.save_log == []


# -- cancellation at a start step ---------------------------------------------------------------


def test_a_cancelled_caller_replays_recorded_starts_and_is_cancelled_at_its_next_new_step():
    def two_children(step: ys.Step, params: Any) -> Any:
        a = step.start("a", "ship-order", {"n": 1})
        try:
            step.start("b", "ship-order", {"n": 2})
        except ys.WorkflowCancelledError:
            step.run("cleanup", lambda: "cleaned")
            raise
        return a

    fake = FakeBackend()
    fake.fail_saves = 0
    step = fake.step()
    step.start("a", "ship-order", {"n": 1})  # recorded before the cancellation
    assert fake.run(two_children, cancel_requested=True) == {"status": "cancelled"}
    assert [c[0][1] for c in fake.calls] == ["a"]  # b was never started
    assert [k for k, _, _ in fake.save_log] == ["a", "cleanup"]


@pytest.mark.parametrize("ending", ["completed", "failed"])
def test_call_replayed_after_the_child_ended_with_a_changed_request_raises_mismatch(ending: str):
    fake = FakeBackend()
    fake.run(call_child)
    child = fake.requests[("order-42", "quote")][2]
    fake.end(
        child,
        {"status": "completed", "result": 1}
        if ending == "completed"
        else {"status": "failed", "error": {"name": "E", "message": "m"}},
    )
    first = fake.run(call_child, attempt=2)
    assert first["status"] == "completed" and "start_error" not in first["result"]
    # deployed new code: the recorded call must not hide the change behind the old outcome
    changed = fake.run(call_child, {"workflow": "quote-express"}, attempt=3)
    assert changed["result"] == {"start_error": "START_REQUEST_MISMATCH"}
    assert fake.run(call_child, {"params": {"order": 43}}, attempt=4)["result"] == {
        "start_error": "START_REQUEST_MISMATCH"
    }
    assert fake.run(call_child, attempt=5) == first  # the unchanged code replays as before
    assert len(fake.calls) == 1
