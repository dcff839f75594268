"""Trace identities: W3C trace context, and the span IDs of an execution's tree.

Every span ID of ys's trace tree is derived from durable facts (the execution's ID, a delivery's
attempt, a step's key and attempt), never drawn at random: the daemon that exports a tree when
the execution ends (ys/daemon/tracing.py), the worker that makes a step's span the current
context for the workflow's own instrumented calls, and a shell step's TRACEPARENT all name the
same spans without telling each other, across restarts and boxes (docs/design.md, "Traces").

Standard library only: nothing here imports OpenTelemetry. `step_context` imports its API only
when the delivery carries a trace context and the workflow's process has the API installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

ENV = "YS_TRACEPARENT"  # a delivery's execution span, set by the daemon when tracing is on
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True)
class TraceParent:
    trace_id: int
    span_id: int
    sampled: bool = True

    def text(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{'01' if self.sampled else '00'}"


def parse(text: str) -> TraceParent | None:
    """A W3C `traceparent` header value (version 00), or None when it is not one."""
    m = _TRACEPARENT.match(text.strip().lower()) if isinstance(text, str) else None
    if m is None:
        return None
    trace_id, span_id = int(m.group(1), 16), int(m.group(2), 16)
    if trace_id == 0 or span_id == 0:
        return None
    return TraceParent(trace_id, span_id, bool(int(m.group(3), 16) & 1))


def check(text: str, where: str = "traceparent") -> str:
    """`text` if it is a W3C traceparent, else INVALID_ARGUMENT naming `where`."""
    if parse(text) is None:
        from ys.errors import InvalidArgument

        raise InvalidArgument(
            "INVALID_ARGUMENT",
            f"{where} must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>), not {text!r}",
        )
    return text.strip().lower()


def _derive(bits: int, *parts: str) -> int:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).digest()
    value = int.from_bytes(digest[: bits // 8], "big")
    return value or 1  # an all-zero ID is invalid in W3C trace context


def root_trace_id(execution_id: str) -> int:
    """The trace of an execution that no caller's trace context started."""
    return _derive(128, "trace", execution_id)


def execution_span_id(execution_id: str) -> int:
    return _derive(64, "execution", execution_id)


def delivery_span_id(execution_id: str, attempt: int) -> int:
    return _derive(64, "delivery", execution_id, str(attempt))


def step_span_id(execution_id: str, key: str, attempt: int) -> int:
    """One attempt of one step (`attempt` counts from 1; steps that do not retry have 1)."""
    return _derive(64, "step", execution_id, key, str(attempt))


def delivery_trace() -> tuple[str, TraceParent] | None:
    """This delivery's execution ID and its execution span, when the daemon traces it."""
    execution_id = os.environ.get("YS_EXECUTION_ID")
    tp = parse(os.environ.get(ENV, ""))
    return (execution_id, tp) if execution_id and tp is not None else None


def step_traceparent(key: str, attempt: int = 1) -> str | None:
    """The W3C traceparent of this delivery's step `key` (a shell step's TRACEPARENT)."""
    found = delivery_trace()
    if found is None:
        return None
    execution_id, tp = found
    return TraceParent(tp.trace_id, step_span_id(execution_id, key, attempt), tp.sampled).text()


@contextlib.contextmanager
def step_context(key: str, attempt: int = 1) -> Iterator[None]:
    """While step `key`'s body runs: its span is the current OpenTelemetry context (so the
    workflow's own instrumented calls join ys's trace, under whatever TracerProvider the
    workflow set up: ys never installs one in a workflow's process), and TRACEPARENT names it
    for the commands the step runs (a shell step's command, a subprocess)."""
    text = step_traceparent(key, attempt)
    if text is None:
        yield
        return
    before = os.environ.get("TRACEPARENT")
    os.environ["TRACEPARENT"] = text
    token = _attach(text)
    try:
        yield
    finally:
        if token is not None:
            from opentelemetry import context

            context.detach(token)
        if before is None:
            os.environ.pop("TRACEPARENT", None)
        else:
            os.environ["TRACEPARENT"] = before


def _attach(text: str) -> Any:
    """Make `text`'s span the current OpenTelemetry context; None when this Python has no
    OpenTelemetry API (the workflow does not trace itself)."""
    try:
        from opentelemetry import context, trace
    except ImportError:
        return None
    tp = parse(text)
    assert tp is not None
    flags = trace.TraceFlags(trace.TraceFlags.SAMPLED if tp.sampled else 0)
    span = trace.NonRecordingSpan(
        trace.SpanContext(tp.trace_id, tp.span_id, is_remote=True, trace_flags=flags)
    )
    return context.attach(trace.set_span_in_context(span))


# -- whether traces are exported (read by the daemon, `ys doctor` and `ys daemon status`) --

_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def wanted(setting: bool | None, env: Mapping[str, str]) -> bool:
    """Whether tracing is asked for: `otel` in config.toml or YS_OTEL decides when given;
    else the standard variables (an OTLP endpoint, or OTEL_TRACES_EXPORTER other than none)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if setting is not None:
        return setting
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return any(env.get(v) for v in _ENDPOINT_VARS)


def installed() -> bool:
    """Whether the `otel` extra is installed (checked without importing it)."""
    from importlib.util import find_spec

    try:
        return all(
            find_spec(m) is not None
            for m in ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http")
        )
    except ModuleNotFoundError:
        return False


class TracingJson(TypedDict):
    """Tracing as `ys doctor` reads it and `GET /v1/version` answers it (docs/API.md)."""

    on: bool
    exporter: str | None  # otlp | console; None when tracing is off
    endpoint: NotRequired[str | None]  # where otlp sends traces
    problem: NotRequired[str]  # why tracing that is asked for cannot run
    exported: NotRequired[int]  # the daemon's: trees exported so far
    failed_exports: NotRequired[int]


def describe(setting: bool | None, env: Mapping[str, str]) -> TracingJson:
    """What `ys doctor` and `ys daemon status` say of tracing: on or off, why, and where to."""
    on = wanted(setting, env)
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower() or "otlp"
    endpoint = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or (
            env["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
            if env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            else "http://localhost:4318/v1/traces"
        )
        if exporter == "otlp"
        else None
    )
    doc: TracingJson = {"on": on and installed(), "exporter": exporter if on else None}
    if on and exporter == "otlp":
        doc["endpoint"] = endpoint
    if on and not installed():
        doc["problem"] = (
            "tracing is asked for but the otel extra is missing: pip install 'ys[otel]'"
        )
    return doc
