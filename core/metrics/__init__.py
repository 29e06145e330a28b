"""Prometheus metrics of one kernel (issue 16, ADR 0028): families, sources, export.

The door is lazy (PEP 562), as ``core.events``: ``main.py metrics`` reads a
snapshot or asks a running kernel without loading the kernel, the agents SDK
or the metrics library; the ``TYPE_CHECKING`` imports give checkers the names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.metrics.collectors import (
        MetricSources as MetricSources,
        SourcesCollector as SourcesCollector,
        kernel_sources as kernel_sources,
    )
    from core.metrics.export import MetricsExport as MetricsExport
    from core.metrics.kernel_metrics import (
        TOKEN_KINDS as TOKEN_KINDS,
        KernelMetrics as KernelMetrics,
    )
    from core.metrics.server import (
        CONTENT_TYPE as CONTENT_TYPE,
        MetricsServer as MetricsServer,
    )
    from core.metrics.snapshot import (
        SNAPSHOT_FILE as SNAPSHOT_FILE,
        fetch_live as fetch_live,
        read_snapshot as read_snapshot,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
