"""The scheduler's operations: add, list, update, cancel (validated, then stored).

Tools, commands and other extensions (``ctx.get_extension("scheduler").scheduler``)
all go through this class, so every path gets the same checks: no empty text,
no time in the past, no cron expression that never fires. Each change wakes
the fire loop so a new earliest due time is honoured at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, tzinfo

from core.extensions.sdk import UnknownTimezoneError, resolve_zone, wall

from .model import DEFAULT_TOPIC, Action, Schedule, ScheduleError, Timing
from .store import ScheduleStore
from .when import check_cron, next_cron

MIN_INTERVAL_S = 1
# ``context.held_notices``: (channel, address) -> what this extension sent there that waits
HeldNotices = Callable[[str, str], Awaitable[list[str]]]


class Scheduler:
    """Validated schedule operations in the user's timezone."""

    def __init__(
        self,
        store: ScheduleStore,
        timezone: str,
        clock: Callable[[], datetime],
        wake: Callable[[], None],
    ) -> None:
        self.store = store
        self.timezone = timezone
        try:
            self.zone: tzinfo = resolve_zone(timezone)
        except UnknownTimezoneError as exc:
            raise ScheduleError(str(exc)) from None
        self.clock = clock
        self._wake = wake

    def now(self) -> datetime:
        return self.clock()

    async def add(
        self,
        timing: Timing,
        text: str,
        *,
        channel_id: str | None = None,
        action: Action = "notify",
        topic: str | None = None,
        user_id: str | None = None,
        person: str | None = None,
    ) -> Schedule:
        """Store a new schedule; raises ``ScheduleError`` naming what is wrong.
        ``channel_id`` and ``user_id`` are where it fires to: the channel and the
        address (user or chat) of the turn that set it; ``person`` whose it is
        (``None``: the owner's). An agent task runs as the owner, so a member
        may not set one."""
        text = _require_text(text)
        if person is not None and action == "agent":
            raise ScheduleError("only the household's owner may schedule assistant tasks")
        now = self.now()
        schedule = await self.store.add(
            text=text,
            timing=timing,
            timezone=self.timezone,
            next_due=self.first_due(timing, now),
            channel_id=channel_id,
            action=action,
            topic=topic or DEFAULT_TOPIC,
            created_at=now,
            user_id=user_id,
            person=person,
        )
        self._wake()
        return schedule

    async def list(self, person: str | None = None) -> list[Schedule]:
        """``person``'s active schedules (``None``: the owner's)."""
        return [s for s in await self.store.active() if s.person == person]

    async def waiting(self, person: str | None, held: HeldNotices) -> list[tuple[str, str]]:
        """(channel, text) of ``person``'s fired reminders that wait for their channel
        to be loaded (``held``: ``context.held_notices``, ADR 0076)."""
        return [
            (channel, text)
            for channel, user in await self.store.addresses(person)
            for text in await held(channel, user)
        ]

    async def cancel(self, schedule_id: int, person: str | None = None) -> Schedule:
        schedule = await self._active(schedule_id, person)
        await self.store.cancel(schedule_id)
        self._wake()
        return schedule

    async def update(
        self,
        schedule_id: int,
        *,
        text: str | None = None,
        timing: Timing | None = None,
        person: str | None = None,
    ) -> Schedule:
        """Change the text and/or the timing of one of ``person``'s active schedules."""
        if text is None and timing is None:
            raise ScheduleError("nothing to change: give a new text or a new time")
        current = await self._active(schedule_id, person)
        new_timing = timing or _timing_of(current)
        next_due = current.next_due if timing is None else self.first_due(timing, self.now())
        new_text = current.text if text is None else _require_text(text)
        if not await self.store.update(
            schedule_id, text=new_text, timing=new_timing, next_due=next_due
        ):
            raise ScheduleError(f"reminder #{schedule_id} has just fired or been cancelled")
        self._wake()
        updated = await self.store.get(schedule_id)
        assert updated is not None
        return updated

    def first_due(self, timing: Timing, now: datetime) -> datetime:
        """The first due instant of ``timing`` as of ``now`` (checks it is usable)."""
        if timing.kind == "once":
            assert timing.at is not None
            if timing.at <= now:
                raise ScheduleError(
                    f"{wall(timing.at, self.zone):%Y-%m-%d %H:%M:%S} is in the past "
                    f"(it is now {wall(now, self.zone):%Y-%m-%d %H:%M:%S} {self.zone})"
                )
            return timing.at
        if timing.kind == "cron":
            assert timing.cron is not None
            return next_cron(check_cron(timing.cron), now, self.zone)
        assert timing.every_s is not None
        if timing.every_s < MIN_INTERVAL_S:
            raise ScheduleError(f"an interval must be at least {MIN_INTERVAL_S} s")
        return now + timedelta(seconds=timing.every_s)

    async def _active(self, schedule_id: int, person: str | None) -> Schedule:
        """An active schedule of ``person``; another person's is as if there were none."""
        schedule = await self.store.get(schedule_id)
        if schedule is None or schedule.person != person:
            raise ScheduleError(f"there is no reminder #{schedule_id}; /reminders lists them")
        if schedule.status != "active":
            raise ScheduleError(f"reminder #{schedule_id} is {_status_word(schedule)} already")
        return schedule


def _require_text(text: str) -> str:
    text = text.strip()
    if not text:
        raise ScheduleError("the reminder text is empty: say what to remind of")
    return text


def _timing_of(schedule: Schedule) -> Timing:
    if schedule.kind == "cron":
        return Timing.on_cron(schedule.spec)
    if schedule.kind == "interval":
        return Timing.every(schedule.every_s)
    return Timing.once(schedule.next_due)


def _status_word(schedule: Schedule) -> str:
    return "cancelled" if schedule.status == "cancelled" else "done (it has fired)"
