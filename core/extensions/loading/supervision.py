"""Runtime supervision of loaded extensions: health, restarts and services.

This is the one restart loop for extensions. Whatever puts a started
extension in ``error`` — a failed or ``False`` health check, a plugin host
that died (the isolation proxy reports it on the record) — the supervisor
sees the record's transition, stops the extension, and retries ``start()``
with exponential backoff until it starts and passes a health check.

Each ``ServiceProvider.run_background`` runs as one task per extension,
owned here: it exists only while its extension is active and started, is
cancelled the moment the extension stops or fails, restarted with backoff
when it raises, and started again when the extension recovers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from core.extensions.loading.capabilities import Capability
from core.extensions.loading.isolation_choice import ISOLATED, isolation_of
from core.extensions.loading.lifecycle import call_with_timeout, describe_exception
from core.extensions.loading.loader import Loader
from core.extensions.loading.records import ExtensionRecord, ExtensionStatus
from core.runtime.backoff import Backoff

log = logging.getLogger("core.loader")


class ExtensionSupervisor:
    """Runs the health loop, recoveries and service tasks inside one TaskGroup."""

    def __init__(
        self,
        loader: Loader,
        *,
        health_interval_s: float = 30.0,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 300.0,
        isolated_backoff_max_s: float | None = None,
    ) -> None:
        self.loader = loader
        self.health_interval_s = health_interval_s
        self.backoff = Backoff(backoff_initial_s, backoff_max_s)
        # plugin hosts have their own cap (isolation.restart_backoff_max_s)
        self.isolated_backoff_max_s = isolated_backoff_max_s
        self._recovering: set[str] = set()
        self._recoveries: dict[str, asyncio.Task[None]] = {}
        self._held: set[str] = set()  # being reloaded: no recovery, no health check
        self._services: dict[str, asyncio.Task[None]] = {}
        self._group: asyncio.TaskGroup | None = None

    @property
    def backoff_initial_s(self) -> float:
        return self.backoff.initial_s

    @backoff_initial_s.setter
    def backoff_initial_s(self, value: float) -> None:
        self.backoff.initial_s = value

    def service_running(self, ext_id: str) -> bool:
        """Whether the extension's ``run_background`` task is alive (``/status``, tests)."""
        task = self._services.get(ext_id)
        return task is not None and not task.done()

    async def run(self) -> None:
        """Run until cancelled; never raises because of an extension."""
        records = list(self.loader.records.values())
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                for record in records:
                    record.watchers.append(self._on_transition)
                    self._sync_service(record)
                    if record.started and record.status is ExtensionStatus.ERROR:
                        self._on_transition(record, ExtensionStatus.ACTIVE)  # died meanwhile
                group.create_task(self._health_loop(), name="health-loop")
        finally:
            self._group = None
            self._services.clear()
            for record in records:
                if self._on_transition in record.watchers:
                    record.watchers.remove(self._on_transition)

    def _on_transition(self, record: ExtensionRecord, previous: ExtensionStatus) -> None:
        self._sync_service(record)
        crashed = record.status is ExtensionStatus.ERROR and record.initialized
        busy = record.ext_id in self._recovering or record.ext_id in self._held
        if crashed and not busy and self._group is not None:
            self._recovering.add(record.ext_id)
            self._recoveries[record.ext_id] = self._group.create_task(
                self._recover(record), name=f"recover:{record.ext_id}"
            )

    @contextlib.asynccontextmanager
    async def holding(self, ext_id: str) -> AsyncIterator[None]:
        """Leave ``ext_id`` alone while a reload replaces its instance (ADR 0032):
        a recovery in progress is cancelled, none starts and no health check
        runs; afterwards one starts if the extension was left in ``error``."""
        self._held.add(ext_id)
        recovery = self._recoveries.get(ext_id)
        if recovery is not None and not recovery.done():
            recovery.cancel()
            await asyncio.wait([recovery])
        try:
            yield
        finally:
            self._held.discard(ext_id)
            record = self.loader.records.get(ext_id)
            if record is not None:
                self._on_transition(record, record.status)

    # ------------------------------------------------------------ services

    def _sync_service(self, record: ExtensionRecord) -> None:
        """One service task per live ``ServiceProvider``; none otherwise."""
        wanted = record.live and Capability.SERVICE in record.capabilities
        task = self._services.get(record.ext_id)
        if wanted and (task is None or task.done()) and self._group is not None:
            name = f"service:{record.ext_id}"
            self._services[record.ext_id] = self._group.create_task(
                self._run_service(record), name=name
            )
        elif not wanted and task is not None:
            task.cancel()
            del self._services[record.ext_id]

    async def _run_service(self, record: ExtensionRecord) -> None:
        delays = self.backoff.delays()
        while True:
            try:
                await record.instance.run_background()
                log.info("service of %s finished", record.ext_id)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = delays.next()
                log.error(
                    "service of %s crashed (%s); restarting in %.1f s",
                    record.ext_id,
                    describe_exception(exc),
                    delay,
                )
            await asyncio.sleep(delay)

    # ------------------------------------------------------------ health

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval_s)
            await self.check_all()

    async def check_all(self) -> None:
        """One round of health checks (also called directly by tests)."""
        for record in self.loader.active():
            if record.started and record.ext_id not in self._recovering | self._held:
                reason = await self._check(record)
                if reason is not None and record.live:
                    self._mark_unhealthy(record, reason)

    async def _check(self, record: ExtensionRecord) -> str | None:
        try:
            healthy = await call_with_timeout(
                record.ext_id, record.instance, "health_check", self.loader.lifecycle_timeout_s
            )
        except Exception as exc:
            return f"health check failed: {describe_exception(exc)}"
        return None if healthy else "health check returned False"

    def _mark_unhealthy(self, record: ExtensionRecord, reason: str) -> None:
        log.error("extension %s unhealthy: %s; stopping it", record.ext_id, reason)
        record.fail(reason)  # unwires it, cancels its service and starts the recovery

    # ------------------------------------------------------------ the restart loop

    def _backoff_for(self, record: ExtensionRecord) -> Backoff:
        manifest = record.manifest
        isolated = manifest is not None and (
            isolation_of(manifest, self.loader.default_isolation) in ISOLATED
        )
        if isolated and self.isolated_backoff_max_s is not None:
            return Backoff(self.backoff.initial_s, self.isolated_backoff_max_s)
        return self.backoff

    async def _recover(self, record: ExtensionRecord) -> None:
        """Stop, then start with backoff until it starts and is healthy."""
        delays = self._backoff_for(record).delays()
        reason = record.error or "error"
        try:
            await self.loader.stop_one(record)
            record.fail(reason)  # a failing stop() must not replace the cause
            while True:
                await asyncio.sleep(delays.next())
                if not await self.loader.start_one(record):
                    record.fail(f"{reason}; restart failed: {record.error}")
                    continue
                problem = await self._check(record)
                if problem is None:
                    record.activate()
                    log.info("extension %s recovered", record.ext_id)
                    return
                reason = problem
                record.fail(problem)
                await self.loader.stop_one(record)
        finally:
            self._recovering.discard(record.ext_id)
            self._recoveries.pop(record.ext_id, None)
