"""What the bus counts for metrics: plain integers, updated in place.

The bus is the hottest path of the kernel, so it keeps no metric objects of a
library (a lock and a label lookup per update): it adds to these fields, and
the metrics exporter (``core/metrics``) reads them when it is scraped. An
update is an attribute increment; the latency histogram is one ``bisect``.
"""

from __future__ import annotations

from bisect import bisect_left

__all__ = ["LATENCY_BOUNDS_MS", "BusStats"]

# upper bounds (ms) of the publish -> handler latency buckets; the last bucket is +Inf
LATENCY_BOUNDS_MS: tuple[float, ...] = (
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1000.0,
    2500.0,
    5000.0,
    10000.0,
)


class BusStats:
    """Counts since the bus was created (one process; the journal keeps the history)."""

    __slots__ = (
        "dead_lettered",
        "delivered",
        "latency_counts",
        "latency_sum_ms",
        "published",
        "retried",
    )

    def __init__(self) -> None:
        self.published = 0  # events committed by publish()
        self.delivered = 0  # deliveries a handler finished
        self.retried = 0  # deliveries that failed and were scheduled again
        self.dead_lettered = 0  # deliveries that failed for the last time
        self.latency_counts = [0] * (len(LATENCY_BOUNDS_MS) + 1)  # per bucket, not cumulative
        self.latency_sum_ms = 0.0

    def observe_latency(self, seconds: float) -> None:
        """From publish to the start of a delivery's first handler call."""
        ms = seconds * 1000.0
        self.latency_counts[bisect_left(LATENCY_BOUNDS_MS, ms)] += 1
        self.latency_sum_ms += ms

    def count_outcome(self, status: str) -> None:
        """A handler's result as the bus records it (``released`` is not counted)."""
        if status == "done":
            self.delivered += 1
        elif status == "retry":
            self.retried += 1
        elif status == "dead":
            self.dead_lettered += 1
