"""How a fired reminder reads: ``⏰ Reminder: call mom``, late ones ``(due 09:00, late)``.

The line is built once, when the fire is planned, so every channel (CLI,
Telegram, the HTTP API's notifications) shows the same words and a reminder
never looks like a reply. ``reminder_format`` (scheduler config) shapes it:
``{text}`` is the reminder, ``{late}`` the late mark (appended at the end
when the format does not place it).
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from core.extensions.sdk import wall

from .model import ScheduleError

DEFAULT_FORMAT = "⏰ Reminder: {text}"


def check_format(fmt: str) -> str:
    """``fmt`` if it formats with ``{text}`` and ``{late}``, else ``ScheduleError`` naming it."""
    if "{text}" not in fmt:
        raise ScheduleError(f"config reminder_format {fmt!r} must contain {{text}}")
    try:
        fmt.format(text="", late="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ScheduleError(
            f"config reminder_format {fmt!r} is not usable ({exc!r}); "
            "it may use only {text} and {late}"
        ) from None
    return fmt


def late_mark(due: datetime, now: datetime, zone: tzinfo, grace_s: float) -> str:
    """``" (due 09:00, late)"`` when fired more than ``grace_s`` after ``due``, else ``""``;
    the date is added when it was due on another local day."""
    if (now - due).total_seconds() <= grace_s:
        return ""
    local_due = wall(due, zone)
    fmt = "%H:%M" if local_due.date() == wall(now, zone).date() else "%Y-%m-%d %H:%M"
    return f" (due {local_due.strftime(fmt)}, late)"


def reminder_line(fmt: str, text: str, late: str) -> str:
    """The reminder as the user sees it."""
    line = fmt.format(text=text, late=late)
    return line if "{late}" in fmt else line + late
