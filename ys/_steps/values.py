"""`step.wait_for`: wait, durably, for a value in the store (the store's value waiters)."""

from __future__ import annotations

from typing import Any

from ys import codec, sdk
from ys._steps import StepMethods
from ys._steps.times import wake_after
from ys.errors import WaitTimeout


class ValueSteps(StepMethods):
    """step.wait_for."""

    def wait_for(
        self, key: str, store_key: str, timeout: float | None = None, newer_than: int = 0
    ) -> Any:
        """Wait until `store_key` holds a value (at a version above `newer_than`) and return
        it; with a timeout, raise ys.WaitTimeout once it passes. Durable: the execution
        suspends while it waits, and a put that lands meanwhile is never missed."""
        # The arguments are checked on every call, a replay's too (a later code change).
        if isinstance(newer_than, bool) or not isinstance(newer_than, int):
            raise TypeError(
                f"step.wait_for({key!r}): newer_than must be a version number, "
                f"not {type(newer_than).__name__}"
            )
        if newer_than < 0:
            raise ValueError(
                f"step.wait_for({key!r}): newer_than must be a version number >= 0, "
                f"not {newer_than!r}"
            )
        now = self._backend.now()
        timeout_at = (
            None
            if timeout is None
            else wake_after(f"step.wait_for({key!r}): timeout", now, timeout)
        )
        saved = self._begin(key)
        if saved is not None and saved.status == "completed":
            return codec.decode(saved.value or "null")
        if saved is not None and saved.status == "failed":
            raise sdk.revive(codec.decode(saved.value or "null"))
        if saved is not None:
            info = codec.decode(saved.value or "{}")
            seen, timeout_at = int(info.get("seen", 0)), info.get("timeout_at")
        else:
            seen = newer_than
        found = self._infra(self._backend.value_wait, store_key, key, seen, timeout_at)
        if found is not None:
            self._save(key, "wait", "completed", found["value"])
            return codec.decode(found["value"])
        if timeout_at is not None and now >= timeout_at:
            error = codec.ErrorValue(
                "WaitTimeout",
                f"no value for {store_key!r} within {timeout}s"
                if timeout is not None
                else f"no value for {store_key!r} in time",
                "WAIT_TIMEOUT",
            )
            self._save(key, "wait", "failed", codec.dumps(error))
            raise WaitTimeout("WAIT_TIMEOUT", error.message)
        info = {"store_key": store_key, "seen": seen, "timeout_at": timeout_at}
        self._save(key, "wait", "waiting", codec.dumps(info), 1, timeout_at)
        self._stop(key)
