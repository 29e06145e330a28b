"""Schedules as short lines for people: ``#3  tomorrow 18:30  call Anna``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, tzinfo

from core.extensions.sdk import wall

from .model import Schedule


def when_text(instant: datetime, zone: tzinfo, now: datetime) -> str:
    """``18:30`` today, ``tomorrow 18:30``, else ``Mon 2024-03-04 09:00`` (seconds if any)."""
    local, today = wall(instant, zone), wall(now, zone).date()
    clock = f"{local:%H:%M:%S}" if local.second else f"{local:%H:%M}"
    if local.date() == today:
        return f"today {clock}"
    if local.date() == today + timedelta(days=1):
        return f"tomorrow {clock}"
    return f"{local:%a %Y-%m-%d} {clock}"


_DAY_WORDS = {"*": "day", "1-5": "weekday", "0,6": "weekend"} | {
    str(n): name
    for n, name in enumerate(
        ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
    )
}


def rule_text(schedule: Schedule) -> str:
    """``every weekday 08:30`` for the cron rules the phrases make, else ``cron "..."``."""
    if schedule.kind == "cron":
        fields = schedule.spec.split()
        if (
            len(fields) == 5
            and fields[0].isdigit()
            and fields[1].isdigit()
            and fields[2:4] == ["*", "*"]
            and fields[4] in _DAY_WORDS
        ):
            return f"every {_DAY_WORDS[fields[4]]} {int(fields[1]):02d}:{int(fields[0]):02d}"
        return f'cron "{schedule.spec}"'
    if schedule.kind == "interval":
        return f"every {duration_text(schedule.every_s)}"
    return "once"


def duration_text(seconds: int) -> str:
    """``9000`` → ``2h30m``."""
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def describe(schedule: Schedule, zone: tzinfo, now: datetime) -> str:
    """One line: id, next time, rule (when recurring), what it does."""
    rule = f" ({rule_text(schedule)})" if schedule.recurring else ""
    action = "[assistant task] " if schedule.action == "agent" else ""
    when = when_text(schedule.next_due, zone, now)
    return f"#{schedule.id}  {when}{rule}  {action}{schedule.text}"


def describe_all(
    schedules: list[Schedule],
    zone: tzinfo,
    now: datetime,
    waiting: Sequence[tuple[str, str]] = (),
) -> str:
    """The active schedules, then the fired reminders that wait for their channel
    (``waiting``: (channel id, text))."""
    if not schedules and not waiting:
        return "No reminders. Set one with /remind WHEN TEXT, e.g. /remind 10m tea."
    lines = [describe(s, zone, now) for s in schedules]
    lines += [
        f"waiting for {channel.removesuffix('_channel')} to be up (it is not loaded): {text}"
        for channel, text in waiting
    ]
    return "\n".join(lines)
