"""`step.start` and `step.call`: a child workflow started once per step key, and a
durable wait for its outcome."""

from __future__ import annotations

from typing import Any

from ys import codec, sdk
from ys._steps import StepMethods
from ys.errors import ChildWorkflowFailed, NotFoundError, WorkflowStartError, YsError
from ys.values import StepWrite


class ChildSteps(StepMethods):
    """step.start and step.call; a child's request is recorded with the step and checked on
    replay."""

    def _request(
        self, key: str, kind: str, workflow: str, params: Any, saved: StepWrite | None
    ) -> str | None:
        """The child a recorded start step names, after checking the request is unchanged;
        None when nothing is recorded. A recorded rejection is raised again."""
        if saved is None:
            return None
        if saved.status == "failed" and saved.kind == "start":
            # A recorded rejection (of a start or of a call's start): the same class and code,
            # whatever the code (revive would turn INVALID_ARGUMENT into InvalidArgument).
            rejected = codec.decode(saved.value or "null")
            if isinstance(rejected, codec.ErrorValue) and rejected.name == "WorkflowStartError":
                raise WorkflowStartError(
                    rejected.code or "START_REQUEST_MISMATCH", rejected.message
                )
            raise sdk.revive(rejected)
        info = codec.decode(saved.value or "null")
        if isinstance(info, dict) and "request" in info:
            info = info["request"]
        from ys.contract import request_params

        asked = request_params(params)
        if (
            not isinstance(info, dict)
            or info.get("workflow") != workflow
            or info.get("params") != asked
        ):
            raise WorkflowStartError(
                "START_REQUEST_MISMATCH",
                f"step {key!r} already started {info.get('workflow') if isinstance(info, dict) else '?'}"
                " with a different request; the code changed after the step was recorded",
            )
        return str(info["execution_id"])

    def _start(self, key: str, kind: str, workflow: str, params: Any, detached: bool) -> str:
        """Call the start client; a rejection is recorded and raised (WorkflowStartError, or
        NotFoundError for a workflow that does not exist, as `ys trigger` refuses it), where
        the workflow may catch it; a replay raises it again."""
        try:
            return str(self._backend.start(key, workflow, params, detached))
        except (WorkflowStartError, NotFoundError) as exc:
            if isinstance(exc, NotFoundError) and exc.code != "WORKFLOW_NOT_FOUND":
                raise sdk.refusal(exc) from exc
            error = codec.ErrorValue(type(exc).__name__, exc.message, exc.code)
            self._save(key, "start", "failed", codec.dumps(error))
            raise
        except (YsError, OSError) as exc:
            raise sdk.refusal(exc) from exc
        except Exception as exc:
            # Whatever else the client throws is not the workflow's to catch.
            raise sdk.InfrastructureFailure(exc) from exc

    def start(
        self, key: str, workflow: str, params: dict[str, Any] | None = None, detached: bool = False
    ) -> str:
        """Start a child workflow once, however often this step replays; returns its ID."""
        saved = self._begin(key)
        child = self._request(key, "start", workflow, params, saved)
        if child is not None:
            return child
        child = self._start(key, "start", workflow, params, detached)
        sdk.crash_point("start.after_client")
        from ys.contract import request_params

        info = {"execution_id": child, "workflow": workflow, "params": request_params(params)}
        self._save(key, "start", "completed", codec.dumps(info))
        return child

    def call(self, key: str, workflow: str, params: dict[str, Any] | None = None) -> Any:
        """Start a child (as step.start) and wait for its outcome: its result, or
        ChildWorkflowFailed. The wait is durable: the execution suspends until the child ends."""
        saved = self._begin(key)
        if saved is not None and saved.kind != "start" and saved.status in ("completed", "failed"):
            # (a recorded rejection of this call's start has kind "start": _request raises it)
            self._request(key, "call", workflow, params, saved)  # the same request, or mismatch
            value = codec.decode(saved.value or "null")
            if saved.status == "failed":
                raise _child_failed(value)
            return value.get("result") if isinstance(value, dict) else None
        child = self._request(key, "call", workflow, params, saved)
        if child is None:
            child = self._start(key, "call", workflow, params, False)
            sdk.crash_point("call.after_client")
        from ys.contract import request_params

        request = {"execution_id": child, "workflow": workflow, "params": request_params(params)}
        record = self._infra(self._backend.get, child)
        outcome = record.get("outcome")
        if record.get("status") not in ("completed", "failed", "cancelled") or outcome is None:
            self._save(key, "call", "waiting", codec.dumps({"request": request}))
            self._stop(key)
        if outcome["status"] == "completed":
            value = {"request": request, "result": outcome.get("result")}
            self._save(key, "call", "completed", codec.dumps(value))
            return outcome.get("result")
        error = outcome.get("error") or {
            "name": "WorkflowCancelledError",
            "message": f"child {child} was cancelled",
        }
        failed = {
            "request": request,
            "child": child,
            "name": error.get("name", "Error"),
            "message": error.get("message", ""),
        }
        self._save(key, "call", "failed", codec.dumps(failed))
        raise _child_failed(failed)


def _child_failed(value: Any) -> ChildWorkflowFailed:
    v = value if isinstance(value, dict) else {}
    child = str(v.get("child") or (v.get("request") or {}).get("execution_id", ""))
    name = str(v.get("name", "Error"))
    message = str(v.get("message", ""))
    return ChildWorkflowFailed(
        f"child {child} failed: {name}: {message}", child_id=child, name=name, child_message=message
    )
