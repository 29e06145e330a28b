"""Runtime supervision of loaded extensions: health checks and services.

Every ``health_check_interval_s`` each started extension's ``health_check()``
runs; ``False`` or an exception marks it ``error`` (reason kept), stops it,
and retries ``start()`` with exponential backoff until it is healthy again.
Each ``ServiceProvider.run_background`` runs as a supervised task that is
restarted with backoff when it raises, and cancelled on shutdown.
"""

from __future__ import annotations

import asyncio
import logging

from core.extensions.lifecycle import call_with_timeout, describe_exception
from core.extensions.loader import Loader
from core.extensions.records import ExtensionRecord, ExtensionStatus

log = logging.getLogger("core.loader")


class ExtensionSupervisor:
    """Runs the health loop and the service tasks inside one TaskGroup."""

    def __init__(
        self,
        loader: Loader,
        *,
        health_interval_s: float = 30.0,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 300.0,
    ) -> None:
        self.loader = loader
        self.health_interval_s = health_interval_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self._recovering: set[str] = set()
        self._group: asyncio.TaskGroup | None = None

    async def run(self) -> None:
        """Run until cancelled; never raises because of an extension."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            for record in self.loader.active("ServiceProvider"):
                group.create_task(self._run_service(record), name=f"service:{record.ext_id}")
            group.create_task(self._health_loop(), name="health-loop")

    # ------------------------------------------------------------ services

    async def _run_service(self, record: ExtensionRecord) -> None:
        delay = self.backoff_initial_s
        while True:
            if record.status is not ExtensionStatus.ACTIVE or not record.started:
                await asyncio.sleep(self.backoff_initial_s)
                continue
            try:
                await record.instance.run_background()
                log.info("service of %s finished", record.ext_id)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error(
                    "service of %s crashed (%s); restarting in %.1f s",
                    record.ext_id,
                    describe_exception(exc),
                    delay,
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.backoff_max_s)

    # ------------------------------------------------------------ health

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval_s)
            await self.check_all()

    async def check_all(self) -> None:
        """One round of health checks (also called directly by tests)."""
        for record in self.loader.active():
            if record.started and record.ext_id not in self._recovering:
                reason = await self._check(record)
                if reason is not None:
                    await self._mark_unhealthy(record, reason)

    async def _check(self, record: ExtensionRecord) -> str | None:
        try:
            healthy = await call_with_timeout(
                record.ext_id, record.instance, "health_check", self.loader.lifecycle_timeout_s
            )
        except Exception as exc:
            return f"health check failed: {describe_exception(exc)}"
        return None if healthy else "health check returned False"

    async def _mark_unhealthy(self, record: ExtensionRecord, reason: str) -> None:
        log.error("extension %s unhealthy: %s; stopping it", record.ext_id, reason)
        record.fail(ExtensionStatus.ERROR, reason)
        await self.loader.stop_one(record)
        record.error = reason
        self._recovering.add(record.ext_id)
        if self._group is not None:
            self._group.create_task(self._recover(record), name=f"recover:{record.ext_id}")

    async def _recover(self, record: ExtensionRecord) -> None:
        delay = self.backoff_initial_s
        reason = record.error
        try:
            while True:
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff_max_s)
                if not await self.loader.start_one(record):
                    record.error = f"{reason}; restart failed: {record.error}"
                    continue
                record.status = ExtensionStatus.ACTIVE
                problem = await self._check(record)
                if problem is None:
                    record.error = None
                    log.info("extension %s recovered", record.ext_id)
                    return
                reason = problem
                record.fail(ExtensionStatus.ERROR, problem)
                await self.loader.stop_one(record)
        finally:
            self._recovering.discard(record.ext_id)
