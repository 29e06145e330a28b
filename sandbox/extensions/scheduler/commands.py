"""``/remind WHEN TEXT``, ``/reminders``, ``/cancel ID`` (SPEC §8): no model needed.

A reminder set by a command is delivered to the channel and the user (or
chat) it was set from (``TurnContext.channel_id`` and ``user_id``). Bad
input gets a one-line answer naming what is wrong.
"""

from __future__ import annotations

from core.extensions.contract import Command, TurnContext

from .describe import describe_all, rule_text, when_text
from .model import ScheduleError, Timing
from .scheduler import HeldNotices, Scheduler
from .when import parse_remind


def parse_id(text: str) -> int:
    """``3`` or ``#3`` → 3."""
    token = text.strip().removeprefix("#")
    if not token.isdigit():
        shown = text.strip() or "(nothing)"
        raise ScheduleError(f'can\'t read "{shown}" as a reminder id; /reminders lists them')
    return int(token)


async def set_reminder(scheduler: Scheduler, timing: Timing, text: str, turn: TurnContext) -> str:
    """Set a reminder for the person of ``turn``, on its channel; the confirmation.
    ``ScheduleError`` when the scheduler refuses it."""
    schedule = await scheduler.add(
        timing,
        text,
        channel_id=turn.channel_id,
        user_id=turn.user_id,
        person=turn.person_key,
    )
    when = when_text(schedule.next_due, scheduler.zone, scheduler.now())
    note = f" ({timing.note})" if timing.note else ""
    if schedule.recurring:
        return f"Reminder #{schedule.id} set ({rule_text(schedule)}), first {when}{note}: {text}"
    return f"Reminder #{schedule.id} set for {when}{note}: {text}"


def build_commands(scheduler: Scheduler, held: HeldNotices) -> list[Command]:
    """``held``: ``context.held_notices``, for the reminders that wait for their channel."""

    async def remind(args: str, turn: TurnContext) -> str:
        try:
            timing, text = parse_remind(args, scheduler.now(), scheduler.zone)
            return await set_reminder(scheduler, timing, text, turn)
        except ScheduleError as exc:
            return str(exc)

    async def reminders(args: str, turn: TurnContext) -> str:
        person = turn.person_key
        waiting = await scheduler.waiting(person, held)
        return describe_all(await scheduler.list(person), scheduler.zone, scheduler.now(), waiting)

    async def cancel(args: str, turn: TurnContext) -> str:
        try:
            schedule = await scheduler.cancel(parse_id(args), turn.person_key)
        except ScheduleError as exc:
            return str(exc)
        return f"Cancelled reminder #{schedule.id}: {schedule.text}"

    return [
        Command(
            "remind",
            "set a reminder: /remind 10m tea, /remind tomorrow 9am call mom,"
            " /remind every weekday 8:30 stand-up, /remind in 2 hours stretch",
            remind,
        ),
        Command("reminders", "list your reminders with their ids", reminders),
        Command("cancel", "cancel a reminder: /cancel ID", cancel),
    ]
