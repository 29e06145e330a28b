"""Where the metrics go: ``/metrics`` (``metrics.listen``) and the snapshot file
(``snapshot.py``), rewritten every ``metrics.snapshot_interval_s`` and at stop."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from core.config import MetricsSettings, listen_address
from core.metrics.kernel_metrics import KernelMetrics
from core.metrics.server import MetricsServer
from core.metrics.snapshot import SNAPSHOT_FILE, write_snapshot

__all__ = ["MetricsExport"]

log = logging.getLogger("core.metrics")


class MetricsExport:
    """Owns the HTTP server and the snapshot loop of one kernel."""

    def __init__(self, metrics: KernelMetrics, settings: MetricsSettings, data_dir: Path) -> None:
        self.metrics = metrics
        self.settings = settings
        self.path = data_dir / SNAPSHOT_FILE
        self.server: MetricsServer | None = None
        if settings.listen is not None:
            host, port = listen_address(settings.listen)
            self.server = MetricsServer(host, port, metrics.registry)

    async def start(self) -> None:
        """Open ``/metrics`` (a port in use is logged, and the kernel runs without it)."""
        if self.server is None:
            return
        try:
            await self.server.start()
        except OSError as exc:
            log.error("metrics: cannot listen on %s (%s); no /metrics", self.settings.listen, exc)
            self.server = None

    async def run(self) -> None:
        """Rewrite the snapshot every ``snapshot_interval_s`` (the kernel's TaskGroup)."""
        while True:
            await asyncio.sleep(self.settings.snapshot_interval_s)
            await self.write_snapshot()

    async def write_snapshot(self) -> None:
        data = self.metrics.exposition()  # on the loop, where the counters change
        try:
            await asyncio.to_thread(write_snapshot, self.path, data)
        except OSError as exc:
            log.warning("metrics: cannot write %s: %s", self.path, exc)

    async def aclose(self) -> None:
        """Kernel stop: close ``/metrics``, then write the final snapshot."""
        if self.server is not None:
            await self.server.aclose()
        await self.write_snapshot()
