"""Manifest ``schedules``: fire each entry on its cron, durably and exactly once.

The timer publishes ``system.schedule.fire`` with the idempotency key
``manifest:<extension>:<name>:<due>``, then records the due instant; a kernel
subscriber calls the extension's ``execute_task`` and turns a returned
``{"text": ...}`` into a proactive message. No fixed tick: the loop sleeps
until the earliest due time (bounded by ``max_sleep_s`` so a wall-clock jump
or a suspended host is noticed) and is woken when the schedules change.
Fires missed while the kernel was down fire once on start, marked late.
Only the schedule leader fires (ADR 0036); a process that takes over
re-reads the fire state first, so it fires what the old leader had not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from core.config import StorageSettings
from core.events import EventBus
from core.events.models import Event
from core.events.topics import SystemTopics
from core.extensions.contract import Leadership, SchedulerProvider
from core.extensions.loading.records import ExtensionRecord
from core.extensions.sdk import (
    Clock,
    CronError,
    DueLoop,
    late_note,
    next_fire,
    resolve_zone,
    utc_now,
)
from core.runtime.errors import HearthError
from core.scheduling.state import FireState

__all__ = [
    "ManifestSchedule",
    "ManifestScheduler",
    "ScheduledTaskError",
    "manifest_schedules",
]

log = logging.getLogger("core.scheduling")

SUBSCRIBER_ID = "kernel.schedules"
SOURCE = "kernel.scheduler"


class ScheduledTaskError(HearthError):
    """A manifest schedule could not run its task; names the extension and task."""

    def __init__(self, extension_id: str, task: str, reason: str) -> None:
        super().__init__(f"scheduled task {task!r} of extension {extension_id!r}: {reason}")
        self.extension_id = extension_id
        self.task = task


@dataclass(frozen=True, slots=True)
class ManifestSchedule:
    """One ``schedules`` entry of an active ``SchedulerProvider``."""

    extension_id: str
    name: str
    task: str
    cron: str
    zone: tzinfo

    @property
    def key(self) -> str:
        return f"{self.extension_id}:{self.name}"


def manifest_schedules(
    records: Iterable[ExtensionRecord], default_timezone: str
) -> list[ManifestSchedule]:
    """The entries of ``records`` (entry ``timezone`` or the kernel's ``timezone``)."""
    found = []
    for record in records:
        assert record.manifest is not None
        for entry in record.manifest.schedules:
            zone = resolve_zone(entry.timezone or default_timezone)
            found.append(
                ManifestSchedule(record.ext_id, entry.name, entry.task_name, entry.cron, zone)
            )
    return found


class ManifestScheduler:
    """Timer + subscriber for manifest schedules (clock injectable for tests)."""

    def __init__(
        self,
        bus: EventBus,
        state_path: Path,
        *,
        lookup: Callable[[str], Any | None],
        clock: Clock = utc_now,
        late_grace_s: float = 60.0,
        task_timeout_s: float = 300.0,
        max_sleep_s: float = 300.0,
        leadership: Callable[[], Leadership] = lambda: Leadership(True),
        storage: StorageSettings | None = None,
    ) -> None:
        self.bus = bus
        self.leadership = leadership
        self._recheck_s: float | None = None
        self._following = False  # not leading at the last look: replan on taking over
        self.state = FireState(state_path, storage=storage)  # PostgreSQL: ADR 0035
        self.lookup = lookup
        self.clock = clock
        self.late_grace_s = late_grace_s
        self.task_timeout_s = task_timeout_s
        self.max_sleep_s = max_sleep_s
        self._schedules: dict[str, ManifestSchedule] = {}
        self._next: dict[str, datetime] = {}
        self._timer = DueLoop(
            self.fire_due, self._next_due, clock, max_sleep_s=max_sleep_s, logger=log
        )
        self._firing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ lifecycle

    def subscribe(self) -> None:
        """Before ``bus.start()``: fires published before a crash are still handled."""
        self.bus.subscribe(SystemTopics.SCHEDULE_FIRE, self._on_fire, SUBSCRIBER_ID, concurrency=4)

    async def start(self, schedules: Iterable[ManifestSchedule]) -> None:
        await self.load(schedules)
        if self._task is None:
            self._task = asyncio.create_task(self._timer.run(), name="manifest-scheduler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.state.close()

    async def load(self, schedules: Iterable[ManifestSchedule]) -> None:
        """Plan ``schedules`` (replacing any earlier set) and wake the loop.

        A schedule seen for the first time starts from now; one that missed
        fires while the kernel was down is due at once (its first missed time).
        """
        await self.state.open()
        now = self.clock()
        self._schedules = {s.key: s for s in schedules}
        self._next = {}
        for key in self._schedules:
            last = await self.state.last_due(key)
            if last is None:
                await self.state.record(key, now)
                last = now
            self._plan(key, last)
        self._timer.wake()

    def _plan(self, key: str, after: datetime) -> None:
        """Set the next due time of ``key``; a cron with no further fire is dropped, logged."""
        schedule = self._schedules[key]
        try:
            self._next[key] = next_fire(schedule.cron, after, schedule.zone)
        except CronError as exc:
            self._next.pop(key, None)
            log.error(
                "schedule %r of %s will not fire: %s", schedule.name, schedule.extension_id, exc
            )

    def next_due(self) -> datetime | None:
        return min(self._next.values(), default=None)

    async def _next_due(self) -> datetime | None:
        due = self.next_due()
        if self._recheck_s is None:
            return due
        recheck = self.clock() + timedelta(seconds=self._recheck_s)
        return recheck if due is None or due > recheck else due

    async def _lead(self) -> bool:
        """Whether to fire now; a process that has just become leader first replans
        from the shared fire state (the old leader may have fired since it planned)."""
        leading = self.leadership()
        self._recheck_s = leading.recheck_s
        if not leading.leader:
            self._following = True
            return False
        if self._following:
            self._following = False
            now = self.clock()
            for key in self._schedules:
                self._plan(key, await self.state.last_due(key) or now)
        return True

    # ------------------------------------------------------------ firing

    async def fire_due(self) -> int:
        """Publish every fire due by the clock's now; return how many."""
        async with self._firing:
            if not await self._lead():
                return 0
            now = self.clock()
            fired = 0
            for key, due in sorted(self._next.items(), key=lambda item: item[1]):
                if due > now:
                    continue
                schedule = self._schedules[key]
                await self.bus.publish(
                    SystemTopics.SCHEDULE_FIRE,
                    SOURCE,
                    {
                        "extension_id": schedule.extension_id,
                        "schedule": schedule.name,
                        "task": schedule.task,
                        "due": due.isoformat(),
                        "late_note": late_note(due, now, schedule.zone, self.late_grace_s),
                    },
                    idempotency_key=f"manifest:{key}:{due.isoformat()}",
                )
                await self.state.record(key, due)
                self._plan(key, max(due, now))
                fired += 1
            return fired

    # ------------------------------------------------------------ handling

    async def _on_fire(self, event: Event) -> None:
        payload = event.payload
        ext_id, task = str(payload["extension_id"]), str(payload["task"])
        instance = self.lookup(ext_id)
        if instance is None or not isinstance(instance, SchedulerProvider):
            raise ScheduledTaskError(ext_id, task, "the extension is not an active scheduler")
        try:
            async with asyncio.timeout(self.task_timeout_s):
                result = await instance.execute_task(task)
        except TimeoutError:
            reason = f"execute_task did not finish within {self.task_timeout_s:g} s"
            raise ScheduledTaskError(ext_id, task, reason) from None
        text = result.get("text") if isinstance(result, dict) else None
        if text:
            await self.bus.publish(
                SystemTopics.USER_NOTIFY,
                SOURCE,
                {"text": f"{text}{payload.get('late_note') or ''}", "channel_id": None},
                idempotency_key=f"manifest-notify:{event.id}",
            )
        log.info("scheduled task %s of %s ran (due %s)", task, ext_id, payload.get("due"))
