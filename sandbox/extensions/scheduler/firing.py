"""The fire loop: publish every due schedule exactly once, then sleep until the next.

Exactly-once: each fire is published with the idempotency key
``scheduler:<schedule id>:<due instant>`` *before* the schedule is advanced
in the store. A crash in between re-publishes the same key after restart,
which the bus turns into a no-op. Fires found due more than ``grace_s`` late
(missed while the kernel was down) are marked: a reminder reads
``⏰ Reminder: stand-up (due 09:00, late)`` (``message.py``), an assistant
task's prompt ends `` (late: due 09:00)``. A recurring schedule fires its
first missed time once, then continues on its rule from now.

Only the schedule leader fires (``context.leadership()``, ADR 0036): with
several kernel processes on one PostgreSQL each runs this loop, the others
look again every ``recheck_s`` seconds, and the one that takes over from a
dead leader finds in the shared store what is due and fires it once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core.extensions.contract import Leadership
from core.extensions.sdk import Clock, DueLoop, late_note, next_interval, resolve_zone

from .message import DEFAULT_FORMAT, late_mark, reminder_line
from .model import AGENT_TASK_TOPIC, DEFAULT_TOPIC, Schedule, ScheduleError
from .store import ScheduleStore
from .when import next_cron

Emit = Callable[[str, dict[str, Any], str], Awaitable[int]]
AskLeadership = Callable[[], Awaitable[Leadership]]

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


def following_due(schedule: Schedule, due: datetime, now: datetime) -> datetime | None:
    """The next due time after firing ``due`` at ``now`` (``None``: a one-shot is finished).

    Counting from ``max(due, now)`` is what makes a recurring catch-up happen at most once.
    """
    if schedule.kind == "cron":
        return next_cron(schedule.spec, max(due, now), resolve_zone(schedule.timezone))
    if schedule.kind == "interval":
        return next_interval(due, schedule.every_s, now)
    return None


def plan_fire(
    schedule: Schedule, now: datetime, grace_s: float, reminder_format: str = DEFAULT_FORMAT
) -> Fire:
    due = schedule.next_due
    zone = resolve_zone(schedule.timezone)
    note = late_note(due, now, zone, grace_s)
    if schedule.action == "agent":
        topic = AGENT_TASK_TOPIC
        payload: dict[str, Any] = {
            "prompt": schedule.text + note,
            "channel_id": schedule.channel_id,
        }
    else:
        topic = schedule.topic
        # a reminder for the user reads as one; another extension's topic gets the text
        if schedule.topic == DEFAULT_TOPIC:
            text = reminder_line(reminder_format, schedule.text, late_mark(due, now, zone, grace_s))
        else:
            text = schedule.text + note
        payload = {
            "text": text,
            "reminder": schedule.text,
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
    """Publishes due fires; ``run`` sleeps until the earliest due time, ``wake()`` looks again."""

    def __init__(
        self,
        store: ScheduleStore,
        emit: Emit,
        clock: Clock,
        *,
        grace_s: float = 60.0,
        max_sleep_s: float = 300.0,
        leadership: AskLeadership | None = None,
        reminder_format: str = DEFAULT_FORMAT,
    ) -> None:
        self.store = store
        self.emit = emit
        self.clock = clock
        self.grace_s = grace_s
        self.leadership = leadership or _always_leader
        self.recheck_s: float | None = None  # from the last leadership answer
        self.reminder_format = reminder_format
        self.timer = DueLoop(
            self.fire_due, self.next_due, clock, max_sleep_s=max_sleep_s, logger=log
        )
        self._firing = asyncio.Lock()

    def wake(self) -> None:
        self.timer.wake()

    async def fire_due(self) -> list[Fire]:
        """Publish, then record, every fire due by the clock's now (leader only)."""
        async with self._firing:
            leading = await self.leadership()
            self.recheck_s = leading.recheck_s
            if not leading.leader:
                return []
            now = self.clock()
            fired = []
            for schedule in await self.store.due(now):
                fire = plan_fire(schedule, now, self.grace_s, self.reminder_format)
                await self.emit(fire.topic, fire.payload, fire.key)
                await self.store.advance(schedule.id, fire.due, fire.next_due)
                fired.append(fire)
            return fired

    async def next_due(self) -> datetime | None:
        """The earliest due time, or sooner when leadership must be looked at again."""
        due = await self.store.next_due()
        if self.recheck_s is None:
            return due
        recheck = self.clock() + timedelta(seconds=self.recheck_s)
        return recheck if due is None or due > recheck else due

    async def run(self) -> None:
        """Until cancelled. A failing pass is logged and retried with backoff."""
        await self.timer.run()


async def _always_leader() -> Leadership:
    return Leadership(True)
