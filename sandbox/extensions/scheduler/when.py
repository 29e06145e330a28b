"""Reading times the way people write them: delays, clock times, dates, cron.

``/remind WHEN TEXT`` (SPEC §8): WHEN is a delay (``45s``, ``10m``,
``2h30m``), a clock time (``18:30``: today if still ahead, else tomorrow) or
a quoted cron expression (recurring). Every failure is a ``ScheduleError``
whose one-line message names the input and what would have been accepted.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from core.extensions.sdk import CronError, next_fire, to_instant, wall
from core.extensions.sdk import check_cron as _check_cron

from .model import ScheduleError, Timing

USAGE = (
    "usage: /remind WHEN TEXT, e.g. /remind 10m tea, /remind 18:30 call Anna,"
    ' /remind "0 9 * * 1-5" plan'
)
_DELAY_RE = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$", re.IGNORECASE)
_CLOCK_RE = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")
_DATETIME_RE = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?$",
    re.IGNORECASE,
)


def check_cron(expr: str) -> str:
    """``expr`` normalised, or ``ScheduleError`` (shown to the user) saying why it is unusable."""
    try:
        return _check_cron(expr)
    except CronError as exc:
        raise ScheduleError(str(exc)) from None


def next_cron(expr: str, after: datetime, zone: tzinfo) -> datetime:
    """The first fire of ``expr`` after ``after``, or ``ScheduleError`` if it never fires."""
    try:
        return next_fire(expr, after, zone)
    except CronError as exc:
        raise ScheduleError(str(exc)) from None


def parse_delay(text: str) -> timedelta | None:
    """``2h30m`` → 2.5 h; ``None`` when ``text`` is not a delay at all."""
    match = _DELAY_RE.match(text.strip())
    if match is None or not any(match.groups()):
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    delay = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if delay <= timedelta(0):
        raise ScheduleError(f'"{text}" is not a delay: it must be longer than 0 s')
    return delay


def parse_clock(text: str, now: datetime, zone: tzinfo) -> datetime | None:
    """``18:30`` → the next such instant (today if still ahead, else tomorrow); ``None`` if
    ``text`` is not a clock time."""
    match = _CLOCK_RE.match(text.strip())
    if match is None:
        return None
    hour, minute, second = (int(g or 0) for g in match.groups())
    if hour > 23 or minute > 59 or second > 59:
        raise ScheduleError(f'"{text}" is not a time of day (00:00 to 23:59)')
    today = wall(now, zone).date()
    for day in (today, today + timedelta(days=1)):
        local = datetime(day.year, day.month, day.day, hour, minute, second)
        instant = to_instant(local, zone)
        if instant > now:
            return instant
    return to_instant(local + timedelta(days=1), zone)


def parse_at(text: str, now: datetime, zone: tzinfo) -> datetime:
    """An instant from ``HH:MM`` or ``YYYY-MM-DD HH:MM[:SS][offset]`` (local when no offset).

    Impossible dates and times in the past are errors.
    """
    instant = parse_clock(text, now, zone)
    if instant is not None:
        return instant
    match = _DATETIME_RE.match(text.strip())
    if match is None:
        raise ScheduleError(
            f'can\'t read "{text}" as a date and time (use "YYYY-MM-DD HH:MM" or "HH:MM")'
        )
    year, month, day, hour, minute, second = (int(g or 0) for g in match.groups()[:6])
    try:
        local = datetime(year, month, day, hour, minute, second)
    except ValueError as exc:
        raise ScheduleError(f'"{text}" is not a real date and time: {exc}') from None
    offset = match.group(7)
    instant = to_instant(local, zone) if offset is None else _with_offset(local, offset)
    if instant <= now:
        raise ScheduleError(
            f'"{text}" is in the past (it is now {wall(now, zone):%Y-%m-%d %H:%M} {zone})'
        )
    return instant


def parse_every(text: str) -> int:
    """``30m`` → 1800 seconds, for recurring schedules."""
    delay = parse_delay(text)
    if delay is None:
        raise ScheduleError(f'can\'t read "{text}" as an interval (45s, 10m, 2h30m, 1d)')
    return int(delay.total_seconds())


def parse_remind(args: str, now: datetime, zone: tzinfo) -> tuple[Timing, str]:
    """The ``/remind`` arguments → (timing, reminder text)."""
    args = args.strip()
    if not args:
        raise ScheduleError(USAGE)
    if args[0] in "\"'":
        quote = args[0]
        end = args.find(quote, 1)
        if end < 0:
            raise ScheduleError(f"the cron expression has no closing {quote}; {USAGE}")
        expr = check_cron(args[1:end])
        next_cron(expr, now, zone)  # an expression that never fires is an error now
        timing, text = Timing.on_cron(expr), args[end + 1 :].strip()
    else:
        when, _, text = args.partition(" ")
        timing = Timing.once(parse_when(when, now, zone))
        text = text.strip()
    if not text:
        raise ScheduleError(f"what should I remind you of? {USAGE}")
    return timing, text


def parse_when(token: str, now: datetime, zone: tzinfo) -> datetime:
    """A delay or a clock time → the due instant."""
    delay = parse_delay(token)
    if delay is not None:
        return now + delay
    instant = parse_clock(token, now, zone)
    if instant is not None:
        return instant
    raise ScheduleError(
        f'can\'t read "{token}" as a delay (45s, 10m, 2h30m), a time (18:30) '
        "or a quoted cron expression"
    )


def _with_offset(local: datetime, offset: str) -> datetime:
    if offset.upper() == "Z":
        return local.replace(tzinfo=UTC)
    sign = -1 if offset[0] == "-" else 1
    digits = offset[1:].replace(":", "")
    delta = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return local.replace(tzinfo=timezone(sign * delta)).astimezone(UTC)
