"""Prometheus metrics of one kernel (issue 16, ADR 0028): families, sources, export.

The door is lazy (PEP 562), as ``core.events``: ``main.py metrics`` reads a
snapshot or asks a running kernel without loading the kernel, the agents SDK
or the metrics library; the ``TYPE_CHECKING`` imports give checkers the names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime import lazy_door

if TYPE_CHECKING:
    from core.metrics.collectors import MetricSources, SourcesCollector, kernel_sources
    from core.metrics.export import MetricsExport
    from core.metrics.kernel_metrics import TOKEN_KINDS, KernelMetrics
    from core.metrics.server import CONTENT_TYPE, MetricsServer
    from core.metrics.snapshot import SNAPSHOT_FILE, fetch_live, read_snapshot

__all__ = [
    "CONTENT_TYPE",
    "SNAPSHOT_FILE",
    "TOKEN_KINDS",
    "KernelMetrics",
    "MetricSources",
    "MetricsExport",
    "MetricsServer",
    "SourcesCollector",
    "fetch_live",
    "kernel_sources",
    "read_snapshot",
]

_HOMES = {
    "MetricSources": "collectors",
    "SourcesCollector": "collectors",
    "kernel_sources": "collectors",
    "MetricsExport": "export",
    "KernelMetrics": "kernel_metrics",
    "TOKEN_KINDS": "kernel_metrics",
    "CONTENT_TYPE": "server",
    "MetricsServer": "server",
    "SNAPSHOT_FILE": "snapshot",
    "fetch_live": "snapshot",
    "read_snapshot": "snapshot",
}


__getattr__, __dir__ = lazy_door(__name__, globals(), _HOMES, __all__)
