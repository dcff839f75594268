"""The daemon's Prometheus metrics (`GET /v1/metrics`, `ys metrics`), made with prometheus_client.

Two kinds of figure. This daemon's own (counters and histograms it keeps as it works, and its
process metrics): on PostgreSQL each daemon reports its own. The database's (executions by
workflow and status, effects by status, due executions): read at each scrape from counts the
store keeps (ys/store/sql/observing.py), so every daemon on one database reports the same.

No metric has a per-execution label: labels are workflow and schedule names, statuses, results
and kinds, all bounded by what the user wrote, never by how much ran.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.utils import floatToGoString

if TYPE_CHECKING:
    from ys.store.protocols import ScheduleAction

DURATIONS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
COMMITS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class _Shared:
    """The database's figures, as of the snapshot the route read before rendering."""

    def __init__(self) -> None:
        self.snapshot: Any = None
        self.now = 0.0

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        if s is None:
            return
        executions = GaugeMetricFamily(
            "ys_executions",
            "Executions in the database, by workflow and status.",
            labels=["workflow", "status"],
        )
        for (workflow, status), n in sorted(s.executions.items()):
            executions.add_metric([workflow, status], n)
        yield executions
        effects = GaugeMetricFamily("ys_effects", "Effect records, by status.", labels=["status"])
        for status, n in sorted(s.effects.items()):
            effects.add_metric([status], n)
        yield effects
        yield GaugeMetricFamily(
            "ys_due_executions", "Executions due now and not being delivered.", value=s.due
        )
        yield GaugeMetricFamily(
            "ys_script_waiting_executions",
            "Executions waiting for their workflow's script, broken or missing (not counted "
            "as due: each is tried again hourly, and at once when its script is fixed).",
            value=s.script_waiting,
        )
        age = 0.0 if s.oldest_due_at is None else max(0.0, self.now - s.oldest_due_at)
        yield GaugeMetricFamily(
            "ys_oldest_due_age_seconds",
            "How long the oldest due execution has waited (0: none).",
            value=age,
        )


class _Series:
    """One label set's buckets: counts per bucket (not cumulative) and the sum."""

    __slots__ = ("counts", "sum", "bounds")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value


class LightHistogram:
    """A histogram for the hot paths (every step, every commit): an observation is a bisect
    and two additions, where prometheus_client's takes a lock and walks every bucket (a
    tenth of the daemon's time per step, profiled). Each is fed from one thread (the loop,
    or the store's writer); a scrape renders it like prometheus_client's own."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: tuple[str, ...] = (),
        *,
        buckets: tuple[float, ...],
        registry: CollectorRegistry,
    ) -> None:
        self.name, self.documentation = name, documentation
        self.labelnames, self.bounds = labelnames, tuple(sorted(buckets))
        self._series: dict[tuple[str, ...], _Series] = {}
        registry.register(self)  # a collector: collect() only
        if not labelnames:
            self._one = self.labels()

    def labels(self, *values: str) -> _Series:
        series = self._series.get(values)
        if series is None:
            series = self._series[values] = _Series(self.bounds)
        return series

    def observe(self, value: float) -> None:
        self._one.observe(value)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, series in sorted(self._series.items()):
            counts, total, buckets = list(series.counts), 0, []
            for bound, n in zip((*self.bounds, float("inf")), counts, strict=True):
                total += n
                buckets.append((floatToGoString(bound), total))  # type: ignore[no-untyped-call]
            family.add_metric(list(values), buckets, series.sum)
        yield family


class Metrics:
    """One daemon's registry; the dispatcher, the scheduler and the routes feed it."""

    content_type = CONTENT_TYPE

    def __init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created` series: they double the output for nothing
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self._shared = _Shared()
        r.register(self._shared)  # a custom collector: collect() only
        self.admissions = Counter(
            "ys_admissions", "Executions this daemon admitted, by how.", ["source"], registry=r
        )
        self.deliveries_started = Counter(
            "ys_deliveries_started", "Deliveries this daemon started.", ["workflow"], registry=r
        )
        self.deliveries_ended = Counter(
            "ys_deliveries_ended",
            "Deliveries this daemon ended, by result (completed, failed, "
            "suspended, cancelled; released: no outcome; lease_lost; unavailable: no runnable "
            "script).",
            ["workflow", "result"],
            registry=r,
        )
        self.delivery_seconds = LightHistogram(
            "ys_delivery_duration_seconds",
            "How long deliveries ran.",
            ("workflow",),
            buckets=DURATIONS,
            registry=r,
        )
        self.step_seconds = LightHistogram(
            "ys_step_duration_seconds",
            "Time from a delivery's start or previous step to the save of a step, by step kind.",
            ("kind",),
            buckets=DURATIONS,
            registry=r,
        )
        self.lease_expiries = Counter(
            "ys_lease_expiries", "Leases that expired (the worker stopped renewing).", registry=r
        )
        self.redeliveries = Counter(
            "ys_redeliveries",
            "Deliveries of an execution after its first.",
            ["workflow"],
            registry=r,
        )
        self.commit_seconds = LightHistogram(
            "ys_store_commit_seconds",
            "How long each store commit took.",
            buckets=COMMITS,
            registry=r,
        )
        self.commit_requests = LightHistogram(
            "ys_store_requests_per_commit",
            "Requests committed together (group commit).",
            buckets=BATCHES,
            registry=r,
        )
        self.database_up = Gauge(
            "ys_database_up",
            "1 while the database answers, 0 while it cannot be reached (a PostgreSQL server "
            "restarting, down or cut off).",
            registry=r,
        )
        self.database_up.set_function(lambda: 1.0)  # the daemon's store says (`watch_database`)
        self.dispatcher_busy = Gauge(
            "ys_dispatcher_busy",
            "1 while a claim round runs or is due at once (asked for by an admission, a "
            "delivery's end, a wake), 0 while the dispatcher waits.",
            registry=r,
        )
        self.dispatcher_busy.set_function(lambda: 0.0)
        self.schedule_slots = Counter(
            "ys_schedule_slots",
            "Schedule slots, by result (fired, late, skipped).",
            ["schedule", "result"],
            registry=r,
        )

    def watch_dispatcher(self, busy: Callable[[], bool]) -> None:
        """`ys_dispatcher_busy` as `busy()` says at each scrape."""
        self.dispatcher_busy.set_function(lambda: 1.0 if busy() else 0.0)

    def watch_database(self, up: Callable[[], bool]) -> None:
        """`ys_database_up` as `up()` says at each scrape."""
        self.database_up.set_function(lambda: 1.0 if up() else 0.0)

    def observe_commit(self, seconds: float, requests: int) -> None:
        """The store writer's commit observer (called on its thread)."""
        self.commit_seconds.observe(seconds)
        self.commit_requests.observe(requests)

    def delivery_ended(self, workflow: str, result: str, seconds: float) -> None:
        self.deliveries_ended.labels(workflow, result).inc()
        self.delivery_seconds.labels(workflow).observe(seconds)

    def schedule_actions(self, schedule: str, actions: list[ScheduleAction]) -> None:
        for a in actions:
            if a.action == "fired":
                self.schedule_slots.labels(schedule, "fired").inc()
                self.admissions.labels("schedule").inc()
            elif a.action == "missed":
                self.schedule_slots.labels(
                    schedule, "late" if a.reason == "late" else "skipped"
                ).inc()
                if a.handler:
                    self.admissions.labels("on_failure").inc()
            elif a.action == "skipped":
                self.schedule_slots.labels(schedule, "skipped").inc()

    def render(self, shared: Any, now: float | None = None) -> bytes:
        """The text format, with the database's figures as of `shared` (a SharedCounts)."""
        self._shared.snapshot = shared
        self._shared.now = time.time() if now is None else now
        try:
            return generate_latest(self.registry)
        finally:
            self._shared.snapshot = None
