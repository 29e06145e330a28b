"""The fire loop: publish every due schedule exactly once, then sleep until the next.

Exactly-once: each fire is published with the idempotency key
``scheduler:<schedule id>:<due instant>`` *before* the schedule is advanced
in the store. A crash in between re-publishes the same key after restart,
which the bus turns into a no-op. Fires found due more than ``grace_s`` late
(missed while the kernel was down) are marked `` (late: due 09:00)``; a
recurring schedule fires its first missed time once, then continues on its
rule from now.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

from .model import AGENT_TASK_TOPIC, Schedule, ScheduleError
from .recurrence import next_cron, next_interval, resolve_zone, wall
from .store import ScheduleStore

Clock = Callable[[], datetime]
Emit = Callable[[str, dict[str, Any], str], Awaitable[int]]

log = logging.getLogger("ext.scheduler")


@dataclass(frozen=True, slots=True)
class Fire:
    """One publication: where it goes, what it says, and the schedule's next due time."""

    schedule: Schedule
    due: datetime
    topic: str
    payload: dict[str, Any]
    key: str
    next_due: datetime | None


def late_note(due: datetime, now: datetime, zone: tzinfo, grace_s: float) -> str:
    """``" (late: due 09:00)"`` when ``now`` is more than ``grace_s`` after ``due``, else ``""``."""
    if (now - due).total_seconds() <= grace_s:
        return ""
    local_due = wall(due, zone)
    fmt = "%H:%M" if local_due.date() == wall(now, zone).date() else "%Y-%m-%d %H:%M"
    return f" (late: due {local_due.strftime(fmt)})"


def following_due(schedule: Schedule, due: datetime, now: datetime) -> datetime | None:
    """The next due time after firing ``due`` at ``now`` (``None``: a one-shot is finished).

    Counting from ``max(due, now)`` is what makes a recurring catch-up happen at most once.
    """
    if schedule.kind == "cron":
        return next_cron(schedule.spec, max(due, now), resolve_zone(schedule.timezone))
    if schedule.kind == "interval":
        return next_interval(due, schedule.every_s, now)
    return None


def plan_fire(schedule: Schedule, now: datetime, grace_s: float) -> Fire:
    due = schedule.next_due
    note = late_note(due, now, resolve_zone(schedule.timezone), grace_s)
    if schedule.action == "agent":
        topic = AGENT_TASK_TOPIC
        payload: dict[str, Any] = {
            "prompt": schedule.text + note,
            "channel_id": schedule.channel_id,
        }
    else:
        topic = schedule.topic
        payload = {
            "text": schedule.text + note,
            "channel_id": schedule.channel_id,
            "schedule_id": schedule.id,
            "due": due.isoformat(),
            "late": bool(note),
        }
    if schedule.user_id is not None:  # who set it (ADR 0017); older schedules have none
        payload["user_id"] = schedule.user_id
    key = f"scheduler:{schedule.id}:{due.isoformat()}"
    try:
        next_due = following_due(schedule, due, now)
    except ScheduleError as exc:  # e.g. a cron whose last possible date has passed
        log.warning("schedule #%d fires for the last time: %s", schedule.id, exc)
        next_due = None
    return Fire(schedule, due, topic, payload, key, next_due)


class FireLoop:
    """Sleeps until the earliest due time; ``wake()`` makes it look again at once."""

    def __init__(
        self,
        store: ScheduleStore,
        emit: Emit,
        clock: Clock,
        *,
        grace_s: float = 60.0,
        max_sleep_s: float = 300.0,
    ) -> None:
        self.store = store
        self.emit = emit
        self.clock = clock
        self.grace_s = grace_s
        self.max_sleep_s = max_sleep_s  # bounds the wait so a wall-clock jump is noticed
        self._wake = asyncio.Event()
        self._firing = asyncio.Lock()

    def wake(self) -> None:
        self._wake.set()

    async def fire_due(self) -> list[Fire]:
        """Publish, then record, every fire due by the clock's now."""
        async with self._firing:
            now = self.clock()
            fired = []
            for schedule in await self.store.due(now):
                fire = plan_fire(schedule, now, self.grace_s)
                await self.emit(fire.topic, fire.payload, fire.key)
                await self.store.advance(schedule.id, fire.due, fire.next_due)
                fired.append(fire)
            return fired

    async def run(self) -> None:
        """Until cancelled. A failing pass is logged and retried with backoff."""
        failures = 0
        while True:
            self._wake.clear()
            try:
                await self.fire_due()
                failures = 0
                timeout = await self._sleep_s()
            except Exception:
                failures += 1
                log.exception("firing schedules failed (attempt %d)", failures)
                timeout = min(2.0**failures, self.max_sleep_s)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    async def _sleep_s(self) -> float:
        due = await self.store.next_due()
        if due is None:
            return self.max_sleep_s
        return min(max((due - self.clock()).total_seconds(), 0.0), self.max_sleep_s)
