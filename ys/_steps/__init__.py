"""The step methods beyond `ys.sdk.Step`'s core, one concept a module, mixed into `Step`:
children (start, call), effects (effect) and durable values (wait_for);
and `times`, the check of every time a step asks for (sleep, retry, timeout wakes).

The mixins reach the SDK's names (Suspend, InfrastructureFailure, revive, crash_point, ...)
through the `ys.sdk` module at call time: ys.sdk imports these modules while it loads, and
crash tests patch `ys.sdk.crash_point`. Only ys.sdk imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    from ys.sdk import Backend
    from ys.values import StepWrite


class StepCore(Protocol):
    """What the mixins use of `ys.sdk.Step`'s core."""

    _backend: Backend

    def _begin(self, key: str) -> StepWrite | None: ...

    def _infra(self, fn: Callable[..., Any], *args: Any) -> Any: ...

    def _stop(self, key: str) -> NoReturn: ...

    def _save(
        self,
        key: str,
        kind: str,
        status: str,
        value: str | None,
        attempts: int = 1,
        wake_at: float | None = None,
    ) -> None: ...


if TYPE_CHECKING:
    StepMethods = StepCore
else:
    StepMethods = object  # at run time a plain base: Step supplies the core
