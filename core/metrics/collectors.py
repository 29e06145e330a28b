"""Families read at scrape time from counters the kernel's parts keep themselves.

The bus counts in plain integers (``core.events.stats``) so publishing stays
as fast as without metrics; the loader counts registrations, the state store
operations and evictions, each isolated extension its host restarts. This
collector turns them into Prometheus families when ``/metrics`` is scraped
or a snapshot is written (both on the event loop).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from core.events.bus import EventBus
from core.events.stats import LATENCY_BOUNDS_MS, BusStats
from core.extensions.isolation.kernel.proxy import IsolatedExtension
from core.extensions.loading.loader import Loader
from core.state import StateStore

__all__ = ["CallCounts", "CallsCollector", "MetricSources", "SourcesCollector", "kernel_sources"]


@dataclass(frozen=True, slots=True)
class MetricSources:
    """Where each family's numbers live (callables: read at scrape time)."""

    registrations: Callable[[], Mapping[tuple[str, str], int]]  # (action, ext id) -> n
    state_operations: Callable[[], Mapping[tuple[str, str], int]]  # (operation, ext id) -> n
    state_evictions: Callable[[], Mapping[str, int]]  # ext id -> keys evicted
    bus: BusStats
    bus_queue_depth: Callable[[], int]
    host_restarts: Callable[[], Mapping[str, int]]  # ext id -> plugin host restarts


class SourcesCollector(Collector):
    """Yields the families of ``MetricSources``."""

    def __init__(self, sources: MetricSources) -> None:
        self._sources = sources

    def collect(self) -> Iterator[Metric]:
        s = self._sources
        yield _counter(
            "extension_registration",
            "Extensions registered (a valid manifest found at start), rejected (bad manifest "
            "or id) and unregistered (directory gone), by action.",
            ["action", "extension_id"],
            s.registrations().items(),
        )
        yield _counter(
            "extension_state_operations",
            "Extension state calls by operation (get, set, delete, clear).",
            ["operation", "extension_id"],
            s.state_operations().items(),
        )
        yield _counter(
            "extension_state_evictions",
            "State keys evicted (least recently used) to keep an extension within its cap.",
            ["extension_id"],
            [((ext_id,), n) for ext_id, n in s.state_evictions().items()],
        )
        yield _counter(
            "isolated_host_restarts",
            "Plugin hosts of isolated extensions started again after the first.",
            ["extension_id"],
            [((ext_id,), n) for ext_id, n in s.host_restarts().items()],
        )
        bus = s.bus
        for name, value, text in (
            ("bus_events_published", bus.published, "Events committed to the journal."),
            ("bus_events_delivered", bus.delivered, "Deliveries a handler finished."),
            ("bus_events_retried", bus.retried, "Deliveries that failed and were retried later."),
            ("bus_events_dead_lettered", bus.dead_lettered, "Deliveries given up (dead)."),
        ):
            yield CounterMetricFamily(name, text, value=value)
        yield GaugeMetricFamily(
            "bus_queue_depth",
            "Deliveries claimed from the journal, waiting in memory for their handler.",
            value=s.bus_queue_depth(),
        )
        cumulative = list(accumulate(bus.latency_counts))
        bounds = [*(f"{b / 1000:g}" for b in LATENCY_BOUNDS_MS), "+Inf"]
        yield HistogramMetricFamily(
            "bus_delivery_latency_seconds",
            "From publish to a delivery's first handler call, in seconds.",
            buckets=list(zip(bounds, cumulative, strict=True)),
            sum_value=bus.latency_sum_ms / 1000,
        )


class CallCounts:
    """One (hook, extension)'s calls: per-bucket counts (not cumulative), the sum
    of the durations, and the calls per outcome."""

    __slots__ = ("buckets", "outcomes", "sum_ms")

    def __init__(self, bounds: int) -> None:
        self.buckets = [0] * (bounds + 1)
        self.sum_ms = 0.0
        self.outcomes: dict[str, int] = {}


class CallsCollector(Collector):
    """``extension_callback_duration_seconds`` and ``extension_callback_total``; the
    counts keep milliseconds, ``bounds`` are in seconds."""

    def __init__(
        self, calls: Mapping[tuple[str, str], CallCounts], bounds: Sequence[float]
    ) -> None:
        self._calls = calls
        self._bounds = [*(f"{b:g}" for b in bounds), "+Inf"]

    def collect(self) -> Iterator[Metric]:
        durations = HistogramMetricFamily(
            "extension_callback_duration_seconds",
            "Duration of extension hook calls (callbacks), in seconds.",
            labels=["callback_type", "extension_id"],
        )
        totals = CounterMetricFamily(
            "extension_callback",
            "Extension hook calls by outcome: ok, error, timeout, cancelled.",
            labels=["callback_type", "extension_id", "outcome"],
        )
        bounds = self._bounds
        for (hook, owner), counts in sorted(list(self._calls.items())):
            cumulative = list(accumulate(counts.buckets))
            durations.add_metric(
                [hook, owner], list(zip(bounds, cumulative, strict=True)), counts.sum_ms / 1000
            )
            for outcome, n in sorted(counts.outcomes.items()):
                totals.add_metric([hook, owner, outcome], n)
        yield durations
        yield totals


def _counter(
    name: str, text: str, labels: list[str], values: Iterable[tuple[tuple[str, ...], int]]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, text, labels=labels)
    for key, value in sorted(list(values)):
        family.add_metric(list(key), value)
    return family


def kernel_sources(loader: Loader, state: StateStore, bus: EventBus) -> MetricSources:
    """The sources of one kernel: its loader, state store and bus."""

    def host_restarts() -> dict[str, int]:
        return {
            ext_id: record.instance.host_restarts
            for ext_id, record in list(loader.records.items())
            if isinstance(record.instance, IsolatedExtension)
        }

    return MetricSources(
        registrations=lambda: loader.registrations,
        state_operations=lambda: state.operations,
        state_evictions=lambda: state.evictions,
        bus=bus.counters,
        bus_queue_depth=bus.queue_depth,
        host_restarts=host_restarts,
    )
