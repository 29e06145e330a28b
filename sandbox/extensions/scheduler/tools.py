"""Tools for the orchestrator: schedule_once, schedule_recurring, list_schedules,
cancel_schedule, update_schedule (the model reads the docstrings).

A schedule set by a tool is delivered to the channel and the user (or chat)
of the turn that set it (``RunContextWrapper.context`` is the kernel's
``TurnContext`` when there is one), else to the default channel. Errors
come back as ``error: ...`` so the model can correct itself or tell the user.
"""

from __future__ import annotations

from typing import Any

from agents import FunctionTool, RunContextWrapper, function_tool

from core.extensions.contract import TurnContext

from .describe import describe, describe_all
from .model import Action, ScheduleError, Timing
from .scheduler import Scheduler
from .when import check_cron, parse_at, parse_recurring, parse_when


def _target(ctx: RunContextWrapper[Any]) -> tuple[str | None, str | None]:
    """(channel, user) of the turn running the tool; (None, None) outside a chat turn."""
    turn = ctx.context
    if not isinstance(turn, TurnContext) or turn.channel_id is None:
        return None, None
    return turn.channel_id, turn.user_id


def _person(ctx: RunContextWrapper[Any]) -> str | None:
    """Whose schedules a tool call reads and changes (no turn: the owner's)."""
    turn = ctx.context
    return turn.person_key if isinstance(turn, TurnContext) else None


def _tool_error(ctx: RunContextWrapper[Any], error: Exception) -> str:
    return f"error: {error}"


def _one_of(**options: str | None) -> tuple[str, str]:
    given = [(name, value) for name, value in options.items() if value]
    if len(given) != 1:
        names = " or ".join(f"`{name}`" for name in options)
        raise ScheduleError(f"give exactly one of {names}")
    return given[0]


def build_tools(scheduler: Scheduler) -> list[FunctionTool]:
    def once_timing(at: str | None, delay: str | None) -> Timing:
        name, value = _one_of(at=at, delay=delay)
        now = scheduler.now()
        if name == "at":
            return Timing.once(parse_at(value, now, scheduler.zone))
        return Timing.once(parse_when(value, now, scheduler.zone))

    def recurring_timing(cron: str | None, every: str | None) -> Timing:
        name, value = _one_of(cron=cron, every=every)
        if name == "cron":
            return Timing.on_cron(check_cron(value))
        return parse_recurring(value, scheduler.now(), scheduler.zone)

    async def added(ctx: RunContextWrapper[Any], timing: Timing, text: str, agent: bool) -> str:
        action: Action = "agent" if agent else "notify"
        channel_id, user_id = _target(ctx)
        schedule = await scheduler.add(
            timing, text, channel_id=channel_id, user_id=user_id, action=action, person=_person(ctx)
        )
        note = f" ({timing.note})" if timing.note else ""
        return f"scheduled {describe(schedule, scheduler.zone, scheduler.now())}{note}"

    async def schedule_once(
        ctx: RunContextWrapper[Any],
        text: str,
        at: str | None = None,
        delay: str | None = None,
        agent_task: bool = False,
    ) -> str:
        """Remind the user once, at a time or after a delay (in the user's timezone).

        Args:
            text: What to tell the user then, e.g. "call Anna". With agent_task, the
                instruction for the assistant to carry out then, e.g. "summarise my day".
            at: Local time as the user said it: "YYYY-MM-DD HH:MM", "HH:MM" or "9am"
                (today if still ahead, else tomorrow), "tomorrow 9:00", "monday 10:00",
                "dec 1 9:00". Give either `at` or `delay`.
            delay: Time from now: "45s", "20m", "2h30m", "1d", "in 10 minutes".
            agent_task: True to run `text` as an instruction for the assistant and send its
                answer; false (default) to send `text` as it is.
        """
        try:
            return await added(ctx, once_timing(at, delay), text, agent_task)
        except ScheduleError as exc:
            return f"error: {exc}"

    async def schedule_recurring(
        ctx: RunContextWrapper[Any],
        text: str,
        cron: str | None = None,
        every: str | None = None,
        agent_task: bool = False,
    ) -> str:
        """Remind the user repeatedly, on a cron schedule or at a fixed interval.

        Args:
            text: What to tell the user each time, or (with agent_task) what the assistant
                should do each time, e.g. "tell me my plan for today".
            cron: Five-field cron in the user's timezone: minute hour day month weekday,
                e.g. "0 9 * * 1-5" (weekdays at 09:00). Give either `cron` or `every`.
            every: A fixed interval ("90s", "10m", "2h") or a local time that repeats:
                "day 9:00", "weekday 8:30", "monday 10:00" (stays at that local time
                across daylight-saving changes).
            agent_task: True to run `text` as an instruction for the assistant each time.
        """
        try:
            return await added(ctx, recurring_timing(cron, every), text, agent_task)
        except ScheduleError as exc:
            return f"error: {exc}"

    async def list_schedules(ctx: RunContextWrapper[Any]) -> str:
        """List the user's active reminders and recurring tasks with their ids."""
        mine = await scheduler.list(_person(ctx))
        return describe_all(mine, scheduler.zone, scheduler.now())

    async def cancel_schedule(ctx: RunContextWrapper[Any], schedule_id: int) -> str:
        """Cancel a reminder or recurring task by its id (see list_schedules).

        Args:
            schedule_id: The number shown as #N by list_schedules.
        """
        try:
            schedule = await scheduler.cancel(schedule_id, _person(ctx))
        except ScheduleError as exc:
            return f"error: {exc}"
        return f"cancelled #{schedule.id}: {schedule.text}"

    async def update_schedule(
        ctx: RunContextWrapper[Any],
        schedule_id: int,
        text: str | None = None,
        at: str | None = None,
        delay: str | None = None,
        cron: str | None = None,
        every: str | None = None,
    ) -> str:
        """Change the text and/or the time of a reminder (give only what changes).

        Args:
            schedule_id: The number shown as #N by list_schedules.
            text: The new text.
            at: New one-shot time: "YYYY-MM-DD HH:MM", "HH:MM", "tomorrow 9:00".
            delay: New one-shot time as a delay from now: "20m".
            cron: New recurring cron expression, e.g. "0 9 * * 1-5".
            every: New recurring interval ("30m") or repeating time ("weekday 8:30").
        """
        try:
            timing = None
            if at or delay:
                if cron or every:
                    raise ScheduleError("give one new time: `at`, `delay`, `cron` or `every`")
                timing = once_timing(at, delay)
            elif cron or every:
                timing = recurring_timing(cron, every)
            schedule = await scheduler.update(
                schedule_id, text=text, timing=timing, person=_person(ctx)
            )
        except ScheduleError as exc:
            return f"error: {exc}"
        return f"updated {describe(schedule, scheduler.zone, scheduler.now())}"

    return [
        function_tool(fn, failure_error_function=_tool_error)
        for fn in (
            schedule_once,
            schedule_recurring,
            list_schedules,
            cancel_schedule,
            update_schedule,
        )
    ]
