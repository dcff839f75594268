"""OpenTelemetry traces of executions, exported by the daemon when each execution ends.

The tree of an execution is built from what the store keeps, when its terminal event is read
from the event log: one span for the execution (admission to end), one per delivery (claim to
release, suspension or outcome), one per step attempt (a step's wait, such as a sleep or a
child's run, as one span from its start to its completion), with effects' IDs and where their
result came from. A sleeping execution holds nothing in memory; a daemon restarted in the middle
still exports the whole tree, since the tree is read from the history. The log is followed from
a cursor kept in `<data>/otel.cursor`, so an execution that ends while the daemon is down, or
just before it is killed, is exported when it comes back (docs/design.md, "Traces").

Span IDs come from ys/tracing.py: the worker makes a step's span the current context, so a
workflow's own instrumented calls join the tree without ys and the workflow exchanging IDs. A
child's execution span hangs under its caller's start step; a retry links to its original.

Only this module imports the OpenTelemetry SDK and exporter (the `otel` extra), and only when
tracing is on: the `otel` setting, or the standard OTEL_* variables.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ys import tracing
from ys.daemon import timeline
from ys.store.protocols import TERMINAL, Effect, Event, Record, Store

log = logging.getLogger("ys.daemon")

POLL_SECONDS = 0.5  # how often the log is read when nothing woke the exporter (other boxes)
BATCH = 500  # events read per pass

# -- the tree, as plain data ------------------------------------------------------------------


# A span's attributes, as OpenTelemetry takes them.
Attributes = dict[str, str | int | float | bool]


@dataclass(frozen=True)
class SpanSpec:
    """One span of an execution's tree, before it is handed to OpenTelemetry."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start: float
    end: float
    attributes: Attributes = field(default_factory=dict)
    error: str | None = None  # set: the span's status is ERROR with this description
    links: tuple[tuple[int, int], ...] = ()  # (trace ID, span ID)
    remote_parent: bool = False


@dataclass(frozen=True)
class Lineage:
    """Where an execution's tree hangs: its trace, and the span its execution span is under."""

    trace_id: int
    parent_id: int | None
    remote_parent: bool = False
    sampled: bool = True


def build(
    record: Record,
    events: list[Event],
    lineage: Lineage,
    *,
    effects: Sequence[Effect] = (),
    retry_of: tuple[int, int] | None = None,
) -> list[SpanSpec]:
    """The spans of a terminal execution, from its history (pure: the same at any time)."""
    xid = record.execution_id
    trace_id = lineage.trace_id
    exec_span = tracing.execution_span_id(xid)
    end = events[-1].at if events else record.updated_at
    attrs: Attributes = {
        "ys.execution_id": xid,
        "ys.workflow": record.workflow,
        "ys.status": record.status,
        "ys.attempts": record.attempts,
    }
    if record.parent:
        attrs["ys.parent"] = record.parent.execution_id
    if record.retry_of:
        attrs["ys.retry_of"] = record.retry_of
    for k, v in sorted(record.tags.items()):
        attrs[f"ys.tag.{k}"] = v
    error = timeline.outcome_error_text(record.outcome) if record.status == "failed" else None
    if record.status == "failed" and error:
        attrs["ys.error"] = error
    spans = [
        SpanSpec(
            name=f"ys {record.workflow}",
            trace_id=trace_id,
            span_id=exec_span,
            parent_id=lineage.parent_id,
            remote_parent=lineage.remote_parent,
            start=record.admitted_at,
            end=end,
            attributes=attrs,
            error=error,
            links=(retry_of,) if retry_of else (),
        )
    ]
    by_step: dict[str, Effect] = {}
    for e in effects:
        for b in e.began_by or ():
            if b.execution_id == xid:
                by_step.setdefault(b.step_key, e)
    for s in timeline.spans(record.admitted_at, events):
        if s.end is None or s.kind == "backoff":
            continue  # a terminal execution's open waits never ended; backoffs are no work
        if s.kind == "delivery":
            spans.append(
                SpanSpec(
                    name=f"delivery {s.n}",
                    trace_id=trace_id,
                    span_id=tracing.delivery_span_id(xid, s.n),
                    parent_id=exec_span,
                    start=s.start,
                    end=s.end,
                    attributes={"ys.execution_id": xid, "ys.attempt": s.n, "ys.outcome": s.status},
                    error=s.error if s.status.startswith("retry") else None,
                )
            )
            continue
        step_attrs: Attributes = {
            "ys.execution_id": xid,
            "ys.workflow": record.workflow,
            "ys.step.key": s.key,
            "ys.step.kind": s.step_kind,
            "ys.step.status": str(s.step_status),
            "ys.step.attempt": s.n,
        }
        if s.kind == "wait" and s.step_kind == "effect" and s.key in by_step:
            eff = by_step[s.key]
            step_attrs["ys.effect.id"] = eff.effect_id
            step_attrs["ys.effect.operation"] = eff.operation
            step_attrs["ys.effect.source"] = _effect_source(eff, xid, s.key)
        err = s.step_error
        if err:
            step_attrs["ys.error"] = err
        spans.append(
            _step(
                xid,
                trace_id,
                s.key,
                s.n,
                s.start,
                s.end,
                s.delivery,
                exec_span,
                step_attrs,
                s.error,
            )
        )
    return spans


def _step(
    xid: str,
    trace_id: int,
    key: str,
    n: int,
    start: float,
    end: float,
    attempt: int,
    exec_span: int,
    attrs: Attributes,
    error: str | None,
) -> SpanSpec:
    parent = tracing.delivery_span_id(xid, attempt) if attempt else exec_span
    return SpanSpec(
        name=f"step {key}",
        trace_id=trace_id,
        span_id=tracing.step_span_id(xid, key, n),
        parent_id=parent,
        start=start,
        end=max(end, start),
        attributes=attrs,
        error=error,
    )


def _effect_source(effect: Effect, xid: str, key: str) -> str:
    """Where an effect step's result came from: `ledger` (settled before this step asked, by
    another execution or step: neither perform nor lookup ran), `lookup` (this step had begun
    it in an earlier delivery whose outcome was unknown, so lookup was asked first), or
    `perform`."""
    began = effect.began_by or ()
    mine = [b for b in began if b.execution_id == xid and b.step_key == key]
    settled = effect.settled_at
    first = min((b.at for b in mine), default=None)
    if settled is not None and first is not None and settled < first:
        return "ledger"
    others = [b for b in began if b not in mine]
    if others and first is not None and min(b.at for b in others) < first:
        return "ledger"
    return "lookup" if len(mine) > 1 else "perform"


# -- lineage: which trace, under which span --------------------------------------------------


class Lineages:
    """Each execution's trace and parent span, read from the records up its parent chain and
    kept (they never change once admitted)."""

    def __init__(self, get: Callable[[str], Record | None], size: int = 10_000) -> None:
        self._get = get
        self._size = size
        self._known: dict[str, Lineage] = {}

    def known(self, execution_id: str) -> Lineage | None:
        return self._known.get(execution_id)

    def of(self, record: Record) -> Lineage:
        known = self._known.get(record.execution_id)
        if known is not None:
            return known
        found = self._derive(record, depth=0)
        if len(self._known) >= self._size:
            self._known.pop(next(iter(self._known)))
        self._known[record.execution_id] = found
        return found

    def _derive(self, record: Record, depth: int) -> Lineage:
        text = _traceparent(record)
        tp = tracing.parse(text) if text else None
        if tp is not None:
            return Lineage(tp.trace_id, tp.span_id, remote_parent=True, sampled=tp.sampled)
        parent = record.parent
        caller = self._get(parent.execution_id) if parent and depth < 64 else None
        if parent is not None and caller is not None:
            up = self._known.get(caller.execution_id) or self._derive(caller, depth + 1)
            step = tracing.step_span_id(caller.execution_id, parent.step_key, 1)
            return Lineage(up.trace_id, step, sampled=up.sampled)
        return Lineage(tracing.root_trace_id(record.execution_id), None)


def _traceparent(record: Record) -> str | None:
    """The trace context its admission was given (`context.traceparent`), if any."""
    try:
        ctx = json.loads(record.context_json or "{}")
    except ValueError:
        return None
    given = ctx.get("traceparent") if isinstance(ctx, dict) else None
    return str(given) if given else None


# -- export -----------------------------------------------------------------------------------


def _exporter(otel_env: Mapping[str, str]) -> Any:
    """The exporter OTEL_TRACES_EXPORTER names (as the settings captured it): otlp or console."""
    kind = otel_env.get("OTEL_TRACES_EXPORTER", "").strip().lower() or "otlp"
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if kind != "otlp":
        log.warning("OTEL_TRACES_EXPORTER=%s is not supported by ys; using otlp", kind)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def to_otel(specs: list[SpanSpec], resource: Any) -> list[Any]:
    """OpenTelemetry's finished spans for `specs` (IDs as given; nothing random)."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

    from ys import __version__

    scope = InstrumentationScope("ys", __version__)
    flags = TraceFlags(TraceFlags.SAMPLED)
    out = []
    for s in specs:
        parent = (
            SpanContext(s.trace_id, s.parent_id, is_remote=s.remote_parent, trace_flags=flags)
            if s.parent_id is not None
            else None
        )
        out.append(
            ReadableSpan(
                name=s.name,
                context=SpanContext(s.trace_id, s.span_id, is_remote=False, trace_flags=flags),
                parent=parent,
                resource=resource,
                attributes=s.attributes,
                links=[
                    Link(SpanContext(t, i, is_remote=True, trace_flags=flags)) for t, i in s.links
                ],
                kind=SpanKind.INTERNAL,
                status=Status(StatusCode.ERROR, s.error) if s.error else Status(StatusCode.UNSET),
                start_time=int(s.start * 1e9),
                end_time=int(s.end * 1e9),
                instrumentation_scope=scope,
            )
        )
    return out


class Tracer:
    """Follows the event log and exports each execution's tree when it ends."""

    def __init__(
        self,
        store: Store,
        data_dir: Path,
        call: Callable[..., Any],
        otel_env: Mapping[str, str] | None = None,
    ) -> None:
        from opentelemetry.sdk.resources import Resource

        self.store = store
        self.call = call  # runs a blocking function off the event loop (the hub's pool)
        self.cursor_file = data_dir / "otel.cursor"
        self.lineages = Lineages(store.get)
        resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "ys"}))
        self.resource = resource
        self.exporter = _exporter(otel_env or {})
        self.exported = 0
        self.failed_exports = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def poke(self) -> None:
        """Something may have ended: read the log now rather than at the next poll."""
        self._wake.set()

    async def traceparent_for(self, execution_id: str) -> str | None:
        """The execution span's trace context, for a delivery's YS_TRACEPARENT (its lineage
        read once, up its parent chain, then kept)."""
        lineage = self.lineages.known(execution_id)
        if lineage is None:
            record = await self.call(self.store.get, execution_id)
            if record is None:
                return None
            lineage = await self.call(self.lineages.of, record)
        span = tracing.execution_span_id(execution_id)
        return tracing.TraceParent(lineage.trace_id, span, lineage.sampled).text()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._follow())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.call(self.exporter.shutdown)

    def _read_cursor(self) -> str | None:
        try:
            text = self.cursor_file.read_text().strip()
        except OSError:
            return None
        return text or None

    def _write_cursor(self, cursor: str) -> None:
        tmp = self.cursor_file.with_name(self.cursor_file.name + ".tmp")
        tmp.write_text(cursor)
        os.replace(tmp, self.cursor_file)

    async def _follow(self) -> None:
        cursor = self._read_cursor()
        complained = False
        while True:
            done = cursor
            try:
                items, after = await self.call(self.store.event_stream, cursor, limit=BATCH)
                for item in items:
                    if item.event.kind in TERMINAL:
                        await self.call(self.export, item.execution_id)
                    done = str(item.pos)
                done = after
                complained = False
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database or the collector is away: try again
                if not complained:
                    log.warning("tracing: cannot export yet (%s); retrying", exc)
                    complained = True
            if done != cursor and done is not None:
                cursor = done
                with contextlib.suppress(OSError):
                    await self.call(self._write_cursor, cursor)
                if not complained and len(items) >= BATCH:
                    continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)

    def export(self, execution_id: str) -> None:
        """Build and export one terminal execution's tree (blocking: runs off the loop)."""
        record = self.store.get(execution_id)
        if record is None or not record.terminal:
            return
        events = self.store.events(execution_id)
        effects = [
            self.store.effect(e.effect_id) or e for e in self.store.effects(None, execution_id)
        ]  # with who began each (the list leaves that out)
        retry_of = None
        if record.retry_of:
            original = self.store.get(record.retry_of)
            if original is not None:
                retry_of = (
                    self.lineages.of(original).trace_id,
                    tracing.execution_span_id(original.execution_id),
                )
        specs = build(record, events, self.lineages.of(record), effects=effects, retry_of=retry_of)
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self.exporter.export(to_otel(specs, self.resource))
        if result is not SpanExportResult.SUCCESS:
            self.failed_exports += 1
            raise RuntimeError(f"the exporter answered {result.name} for {execution_id}")
        self.exported += 1
