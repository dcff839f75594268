"""ys: durable workflows for scripts.

What a workflow script imports (`ys.workflow`, `ys.Step`, `ys.Retry`, the errors, the effect
lookup results) and what an application uses (`ys.Client`). Every error class of ys.errors is
here: `except ys.NotFoundError` around `Client.get` (not `ys.NotFound`: that is the answer an
effect's `lookup` gives when the operation did not happen, not an exception). Names load lazily, so
`import ys` stays cheap for the CLI and for workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "workflow": "ys.sdk",
    "Step": "ys.sdk",
    "Retry": "ys.sdk",
    "Settled": "ys.sdk",
    "NotFound": "ys.sdk",
    "Unknown": "ys.sdk",
    "Client": "ys.client",
    "YsError": "ys.errors",
    "ExecutionAdmissionError": "ys.errors",
    "ExecutionNotTerminal": "ys.errors",
    "ExecutionTimeout": "ys.errors",
    "WorkflowStartError": "ys.errors",
    "WorkflowEffectError": "ys.errors",
    "ChildWorkflowFailed": "ys.errors",
    "WorkflowCancelledError": "ys.errors",
    "WaitTimeout": "ys.errors",
    "StepTimeout": "ys.errors",
    "EffectInvariantError": "ys.errors",
    "VersionConflict": "ys.errors",
    "LeaseLost": "ys.errors",
    "DaemonUnavailable": "ys.errors",
    "DatabaseMoved": "ys.errors",
    "DatabaseUnavailable": "ys.errors",
    "NotFoundError": "ys.errors",
    "InvalidArgument": "ys.errors",
    "ValueTooLarge": "ys.errors",
    "ResourceExhausted": "ys.errors",
}

if TYPE_CHECKING:
    from ys.client import Client
    from ys.errors import (
        ChildWorkflowFailed,
        DaemonUnavailable,
        DatabaseMoved,
        DatabaseUnavailable,
        EffectInvariantError,
        ExecutionAdmissionError,
        ExecutionNotTerminal,
        ExecutionTimeout,
        InvalidArgument,
        LeaseLost,
        NotFoundError,
        ResourceExhausted,
        StepTimeout,
        ValueTooLarge,
        VersionConflict,
        WaitTimeout,
        WorkflowCancelledError,
        WorkflowEffectError,
        WorkflowStartError,
        YsError,
    )
    from ys.sdk import NotFound, Retry, Settled, Step, Unknown, workflow


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        if name in ("codec", "testing"):
            import importlib

            return importlib.import_module(f"ys.{name}")
        raise AttributeError(f"module 'ys' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ChildWorkflowFailed",
    "Client",
    "DaemonUnavailable",
    "DatabaseMoved",
    "DatabaseUnavailable",
    "EffectInvariantError",
    "ExecutionAdmissionError",
    "ExecutionNotTerminal",
    "ExecutionTimeout",
    "InvalidArgument",
    "LeaseLost",
    "NotFound",
    "NotFoundError",
    "ResourceExhausted",
    "Retry",
    "Settled",
    "Step",
    "StepTimeout",
    "Unknown",
    "ValueTooLarge",
    "VersionConflict",
    "WaitTimeout",
    "WorkflowCancelledError",
    "WorkflowEffectError",
    "WorkflowStartError",
    "YsError",
    "__version__",
    "workflow",
]
