"""`step.effect`: an external operation performed at most once per effect ID, with
`lookup` asked what happened after any attempt whose outcome is unknown."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ys import codec, sdk, tracing
from ys._steps import StepMethods
from ys.errors import REFUSALS, EffectInvariantError, ValueTooLarge, WorkflowEffectError, YsError


class _Failed:
    """A callback raised: its outcome is unknown."""


class EffectSteps(StepMethods):
    """step.effect and the driver's helpers."""

    def effect(
        self,
        key: str,
        *,
        effect_id: str,
        operation: str,
        input: dict[str, Any],
        perform: Callable[[str], Any],
        lookup: Callable[[str], Any],
        retry_in: float = 60.0,
    ) -> Any:
        """Perform an external operation at most once per effect ID, asking `lookup` what
        happened after any uncertain attempt (the effect driver's rules, docs/workflows.md)."""
        saved = self._begin(key)
        if saved is not None and saved.status == "completed":
            return codec.decode(saved.value or "null")
        if saved is not None and saved.status == "failed":
            raise sdk.revive(codec.decode(saved.value or "null"))
        try:
            from ys.contract import check_effect_request

            check_effect_request(effect_id, operation, input, retry_in, now=self._backend.now())
            if not callable(perform) or not callable(lookup):
                raise WorkflowEffectError(
                    "INVALID_EFFECT_REQUEST", "perform and lookup must be callables"
                )
            state = self._effect_call(self._backend.effect_begin, operation, effect_id, input, key)
        except WorkflowEffectError as exc:
            error = codec.ErrorValue("WorkflowEffectError", exc.message, exc.code)
            self._save(key, "effect", "failed", codec.dumps(error))
            raise
        sdk.crash_point("effect.after_begin")
        if not isinstance(state, dict) or state.get("status") not in ("new", "pending", "settled"):
            # Never perform on an answer the driver cannot read.
            raise sdk.InfrastructureFailure(
                EffectInvariantError(
                    "EFFECT_RUNTIME_INVARIANT", f"effect begin answered {state!r}"
                ),
                "EFFECT_RUNTIME_INVARIANT",
            )
        if state["status"] == "settled":
            return self._effect_done(key, state.get("result"))
        result_json: str | None = None
        if state["status"] == "pending":
            with tracing.step_context(key):
                found = self._callback(lookup, effect_id, "lookup")
            sdk.crash_point("effect.after_lookup")
            if isinstance(found, sdk.Settled):
                result_json = self._durable(found.result, "lookup")
            elif isinstance(found, sdk.NotFound):
                found = None
            elif isinstance(found, sdk.Unknown | _Failed):
                return self._effect_wait(key, effect_id, retry_in)
            else:
                raise sdk.InfrastructureFailure(
                    TypeError(
                        f"lookup returned {type(found).__name__}, not Settled, NotFound or Unknown"
                    ),
                    "EFFECT_HANDLER_INVALID",
                )
        if result_json is None:
            with tracing.step_context(key):
                performed = self._callback(perform, effect_id, "perform")
            sdk.crash_point("effect.after_perform")
            if isinstance(performed, _Failed):
                return self._effect_wait(key, effect_id, retry_in)
            result_json = self._durable(performed, "perform")
        settled = self._effect_call(self._backend.effect_settle, operation, effect_id, result_json)
        sdk.crash_point("effect.after_settle")
        if not isinstance(settled, dict) or settled.get("status") not in ("settled", "conflict"):
            raise sdk.InfrastructureFailure(
                EffectInvariantError(
                    "EFFECT_RUNTIME_INVARIANT", f"effect settle answered {settled!r}"
                ),
                "EFFECT_RUNTIME_INVARIANT",
            )
        if settled["status"] == "conflict":
            sys.stderr.write(
                f"ys: EFFECT_CONFLICT: effect {effect_id!r} was already settled with another "
                "result; the first result is kept and the conflict is reported (ys effect "
                f"{effect_id})\n"
            )
        return self._effect_done(key, settled.get("result"))

    def _effect_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """An effect client call: a rejection passes through; any other failure is
        EFFECT_CLIENT_UNAVAILABLE (or the invariant code), never a workflow error."""
        try:
            return fn(*args)
        except WorkflowEffectError:
            raise
        except YsError as exc:
            if exc.code in REFUSALS:
                raise sdk.Refused(exc, exc.code) from exc
            code = (
                exc.code
                if exc.code == "EFFECT_RUNTIME_INVARIANT"
                else ("EFFECT_CLIENT_UNAVAILABLE")
            )
            raise sdk.InfrastructureFailure(exc, code) from exc
        except Exception as exc:
            raise sdk.InfrastructureFailure(exc, "EFFECT_CLIENT_UNAVAILABLE") from exc

    @staticmethod
    def _callback(fn: Callable[[str], Any], effect_id: str, what: str) -> Any:
        """A perform or lookup call; a raising callback is an unknown outcome."""
        try:
            return sdk._call(fn, (effect_id,))
        except Exception as exc:
            sys.stderr.write(
                f"ys: {what} for effect {effect_id!r} raised "
                f"{type(exc).__name__}: {exc}; its outcome is unknown\n"
            )
            return _Failed()

    @staticmethod
    def _durable(value: Any, what: str) -> str:
        """A callback's result as canonical text; one that is not a durable value, or too big
        to save, is an invalid callback result (no step is recorded and the effect stays pending)."""
        enc = codec.encode(value, path=f"{what} result")
        if enc.status != "encoded" or enc.canonical is None:
            raise sdk.InfrastructureFailure(ValueError(enc.message), "EFFECT_HANDLER_INVALID")
        try:
            return codec.check_size(enc.canonical, f"{what} result")
        except ValueTooLarge as exc:
            raise sdk.InfrastructureFailure(exc, "EFFECT_HANDLER_INVALID") from exc

    def _effect_done(self, key: str, result_json: Any) -> Any:
        """Record the settled result; text the client sent that is not a durable value is a
        runtime invariant (checked before it is recorded, so replay never reads it)."""
        try:
            result = codec.decode(result_json)
        except (TypeError, ValueError) as exc:
            raise sdk.InfrastructureFailure(
                EffectInvariantError(
                    "EFFECT_RUNTIME_INVARIANT", f"the effect client's result is not durable: {exc}"
                ),
                "EFFECT_RUNTIME_INVARIANT",
            ) from exc
        self._save(key, "effect", "completed", result_json)
        return result

    def _effect_wait(self, key: str, effect_id: str, retry_in: float) -> Any:
        """Register as a waiter (the wake comes with it), then record the unfinished step."""
        wake_at = self._effect_call(
            self._backend.effect_wait, effect_id, key, self._backend.now() + retry_in
        )
        sdk.crash_point("effect.after_wait")
        self._save(key, "effect", "waiting", None, 1, float(wake_at))
        self._stop(key)
