"""Reminder times the way people type them, read from the start of a sentence.

One-shot: a delay (``45s``, ``2h30m``, ``in 2h``, ``in 10 minutes``), a clock
time (``18:30``, ``9am``: today if still ahead, else tomorrow), a day and a
time (``tomorrow 9:00``, ``today 18:00``, ``mon 10:00``, ``next friday 9am``),
a date and a time (``2026-12-01 09:00``, ``dec 1 9:00``, ``1 dec 9:00``).
Recurring: ``every day 9:00``, ``every weekday 8:30``, ``every weekend 10:00``,
``every monday 10:00`` (cron in the user's timezone, so 9:00 stays 9:00 local
across DST) and ``every 2h`` / ``every hour`` (an interval of real elapsed time).
``at`` may precede a clock time (``tomorrow at 9am``).

Wall times are local to the user's zone. A time that does not exist on a
spring-forward day (``2:30`` in Berlin on the last Sunday of March) moves to
the first instant after the gap (03:00), and the ``Timing`` carries a note
saying so; an ambiguous fall-back time is its first occurrence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo

from core.extensions.sdk import to_instant, wall

from .model import ScheduleError, Timing

FORMS = (
    "10m, in 2 hours, 18:30, 9am, tomorrow 9:00, monday 10:00, dec 1 9:00, "
    "2026-12-01 09:00, every day 9:00, every weekday 8:30, every monday 10:00, every 2h, "
    'or a quoted cron expression like "0 9 * * 1-5"'
)

_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "wk", "week", "weeks"), 604800),
}
_GLUED_RE = re.compile(r"^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$", re.IGNORECASE)
_NUMBER_UNIT_RE = re.compile(r"^(\d+)([a-z]+)$", re.IGNORECASE)
_CLOCK_RE = re.compile(r"^(\d{1,2})(?::(\d{2})(?::(\d{2}))?)?\s*(am|pm)?$", re.IGNORECASE)
_ISO_RE = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?)?$",
    re.IGNORECASE,
)
_DAY_RE = re.compile(r"^(\d{1,2})(?:st|nd|rd|th)?,?$", re.IGNORECASE)
_WEEKDAYS = {  # Python's weekday(): Monday is 0
    **dict.fromkeys(("mon", "monday"), 0),
    **dict.fromkeys(("tue", "tues", "tuesday"), 1),
    **dict.fromkeys(("wed", "weds", "wednesday"), 2),
    **dict.fromkeys(("thu", "thur", "thurs", "thursday"), 3),
    **dict.fromkeys(("fri", "friday"), 4),
    **dict.fromkeys(("sat", "saturday"), 5),
    **dict.fromkeys(("sun", "sunday"), 6),
}
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        start=1,
    )
    for name in names
}
_DAY_GROUPS = {"day": "*", "daily": "*", "weekday": "1-5", "weekdays": "1-5", "weekend": "0,6"}
_NAMED_CLOCKS = {"noon": (12, 0, 0), "midnight": (0, 0, 0)}

Clock = tuple[int, int, int]


def unreadable(text: str) -> ScheduleError:
    """The one-line error for a time nobody could read, listing what is accepted."""
    return ScheduleError(f'can\'t read "{text}" as a time; try {FORMS}')


def read_time(words: Sequence[str], now: datetime, zone: tzinfo) -> tuple[Timing, int] | None:
    """The timing at the start of ``words`` and how many words it took; ``None`` when
    the first words are no time at all. ``ScheduleError`` for a time that is
    recognisable but impossible (``25:00``, ``feb 30 9:00``, ``tomorrow`` alone)."""
    lowered = [w.lower() for w in words]
    if not lowered:
        return None
    if lowered[0] in ("every", "daily"):
        return _recurring(lowered, now, zone)
    if lowered[0] == "in":
        delay = read_delay(lowered, 1)
        return None if delay is None else (Timing.once(now + delay[0]), 1 + delay[1])
    delay = read_delay(lowered, 0)
    if delay is not None:
        return Timing.once(now + delay[0]), delay[1]
    return _one_shot(lowered, now, zone)


def read_delay(words: Sequence[str], start: int) -> tuple[timedelta, int] | None:
    """``2h30m``, ``10 minutes``, ``1 hour 30 min``, ``an hour`` from ``words[start:]``:
    (the delay, words used), or ``None``. A zero delay is an error."""
    total, i = 0, start
    while i < len(words):
        if i > start and words[i] in ("a", "an"):  # "10m a day off": the text begins
            break
        seconds, used = _delay_part(words, i)
        if not used and words[i] == "and" and total and _delay_part(words, i + 1)[1]:
            i += 1
            continue
        if not used:
            break
        total, i = total + seconds, i + used
    if i == start:
        return None
    if total <= 0:
        raise ScheduleError(
            f'"{" ".join(words[start:i])}" is not a delay: it must be longer than 0 s'
        )
    return timedelta(seconds=total), i - start


def _delay_part(words: Sequence[str], i: int) -> tuple[int, int]:
    """(seconds, words used) of one delay piece at ``words[i]``; used 0 when none."""
    if i >= len(words):
        return 0, 0
    word = words[i]
    glued = _GLUED_RE.match(word)
    if glued is not None and any(glued.groups()):
        weeks, days, hours, minutes, seconds = (int(g or 0) for g in glued.groups())
        return (((weeks * 7 + days) * 24 + hours) * 60 + minutes) * 60 + seconds, 1
    number_unit = _NUMBER_UNIT_RE.match(word)
    if number_unit is not None and number_unit.group(2).lower() in _UNITS:
        return int(number_unit.group(1)) * _UNITS[number_unit.group(2).lower()], 1
    amount = 1 if word in ("a", "an") else int(word) if word.isdigit() else None
    if amount is not None and i + 1 < len(words) and words[i + 1] in _UNITS:
        return amount * _UNITS[words[i + 1]], 2
    return 0, 0


def read_clock(word: str) -> Clock | None:
    """``18:30``, ``9am``, ``9:30pm``, ``noon`` → (hour, minute, second); ``None`` when
    ``word`` is no clock time; ``ScheduleError`` for ``25:00`` or ``13pm``. A bare
    number is a clock time only with am/pm (``9`` alone could be anything)."""
    if word in _NAMED_CLOCKS:
        return _NAMED_CLOCKS[word]
    match = _CLOCK_RE.match(word)
    if match is None or (match.group(2) is None and match.group(4) is None):
        return None
    hour, minute, second = (int(g or 0) for g in match.groups()[:3])
    half = (match.group(4) or "").lower()
    if half:
        if not 1 <= hour <= 12:
            raise ScheduleError(f'"{word}" is not a time of day (1am to 12pm)')
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        raise ScheduleError(f'"{word}" is not a time of day (00:00 to 23:59)')
    return hour, minute, second


def _clock_at(words: Sequence[str], i: int) -> tuple[Clock, int] | None:
    """A clock time at ``words[i]``, optionally after ``at``: (clock, words used)."""
    skip = 1 if i < len(words) and words[i] == "at" else 0
    if i + skip >= len(words):
        return None
    word = words[i + skip]
    if word.isdigit() and i + skip + 1 < len(words) and words[i + skip + 1] in ("am", "pm"):
        clock = read_clock(word + words[i + skip + 1])  # "9 am"
        return None if clock is None else (clock, skip + 2)
    clock = read_clock(word)
    return None if clock is None else (clock, skip + 1)


def _needs_clock(words: Sequence[str], i: int, what: str) -> tuple[Clock, int]:
    found = _clock_at(words, i)
    if found is None:
        raise ScheduleError(f'"{what}" needs a time of day, e.g. "{what} 9:00"; try {FORMS}')
    return found


def _once_on(day: date, clock: Clock, zone: tzinfo) -> Timing:
    """The instant of ``clock`` on ``day`` in ``zone``, with a note if DST moved it."""
    local = datetime(day.year, day.month, day.day, *clock)
    instant = to_instant(local, zone)
    shifted = wall(instant, zone)
    timing = Timing.once(instant)
    if shifted != local:
        note = (
            f"{local:%H:%M} does not exist on {day:%Y-%m-%d} (the clocks go forward), "
            f"so it is set for {shifted:%H:%M}"
        )
        timing = replace(timing, note=note)
    return timing


def _one_shot(words: Sequence[str], now: datetime, zone: tzinfo) -> tuple[Timing, int] | None:
    today = wall(now, zone).date()
    first = words[0]
    clock = _clock_at(words, 0)
    if clock is not None:  # today if still ahead, else tomorrow
        for day in (today, today + timedelta(days=1)):
            timing = _once_on(day, clock[0], zone)
            if timing.at is not None and timing.at > now:
                return timing, clock[1]
        return _once_on(today + timedelta(days=2), clock[0], zone), clock[1]
    if first in ("today", "tonight", "tomorrow", "tmrw", "tmr"):
        found = _needs_clock(words, 1, first)
        offset = 0 if first in ("today", "tonight") else 1
        return _once_on(today + timedelta(days=offset), found[0], zone), 1 + found[1]
    skip = 1 if first in ("next", "on") and len(words) > 1 and words[1] in _WEEKDAYS else 0
    if words[skip] in _WEEKDAYS:
        found = _needs_clock(words, skip + 1, " ".join(words[: skip + 1]))
        ahead = (_WEEKDAYS[words[skip]] - today.weekday()) % 7
        if first == "next" and ahead == 0:
            ahead = 7
        timing = _once_on(today + timedelta(days=ahead), found[0], zone)
        if timing.at is not None and timing.at <= now:  # that weekday is today, time gone
            timing = _once_on(today + timedelta(days=7), found[0], zone)
        return timing, skip + 1 + found[1]
    return _dated(words, now, zone)


def _dated(words: Sequence[str], now: datetime, zone: tzinfo) -> tuple[Timing, int] | None:
    """``2026-12-01 09:00``, ``2026-12-01T09:00+01:00``, ``dec 1 9:00``, ``1 dec 9:00``."""
    iso = _ISO_RE.match(words[0])
    if iso is not None:
        if iso.group(4) is not None:
            return _iso_instant(words[0], iso, zone), 1
        found = _needs_clock(words, 1, words[0])
        day = _real_date(int(iso.group(1)), int(iso.group(2)), int(iso.group(3)), words[0])
        return _once_on(day, found[0], zone), 1 + found[1]
    if len(words) < 2:
        return None
    if words[0] in _MONTHS and _DAY_RE.match(words[1]):
        month, day_word = _MONTHS[words[0]], words[1]
    elif words[1] in _MONTHS and _DAY_RE.match(words[0]):
        month, day_word = _MONTHS[words[1]], words[0]
    else:
        return None
    match = _DAY_RE.match(day_word)
    assert match is not None
    typed = f"{words[0]} {words[1]}"
    found = _needs_clock(words, 2, typed)
    this_year = wall(now, zone).year
    for year in (this_year, this_year + 1):
        timing = _once_on(_real_date(year, month, int(match.group(1)), typed), found[0], zone)
        if timing.at is not None and timing.at > now:
            break
    return timing, 2 + found[1]


def _real_date(year: int, month: int, day: int, typed: str) -> date:
    try:
        return date(year, month, day)
    except ValueError as exc:
        raise ScheduleError(f'"{typed}" is not a real date: {exc}') from None


def with_offset(local: datetime, offset: str) -> datetime:
    """The naive ``local`` read at the UTC offset ``offset`` (``Z``, ``+01:00``, ``-0500``)."""
    if offset.upper() == "Z":
        return local.replace(tzinfo=UTC)
    sign = -1 if offset[0] == "-" else 1
    digits = offset[1:].replace(":", "")
    delta = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return local.replace(tzinfo=timezone(sign * delta)).astimezone(UTC)


def _iso_instant(word: str, match: re.Match[str], zone: tzinfo) -> Timing:
    year, month, day, hour, minute, second = (int(g or 0) for g in match.groups()[:6])
    try:
        local = datetime(year, month, day, hour, minute, second)
    except ValueError as exc:
        raise ScheduleError(f'"{word}" is not a real date and time: {exc}') from None
    if match.group(7) is not None:
        return Timing.once(with_offset(local, match.group(7)))
    return _once_on(local.date(), (hour, minute, second), zone)


def _recurring(words: Sequence[str], now: datetime, zone: tzinfo) -> tuple[Timing, int] | None:
    """``every day 9:00`` (cron, local wall time), ``every 2h`` (interval)."""
    skip = 0 if words[0] == "daily" else 1
    if skip >= len(words):
        return None
    group = words[skip]
    days = _DAY_GROUPS.get(group)
    if days is None and group in _WEEKDAYS:
        days = str((_WEEKDAYS[group] + 1) % 7)  # cron: Sunday is 0
    if days is not None:
        found = _clock_at(words, skip + 1)
        if found is not None:
            hour, minute, second = found[0]
            if second:
                raise ScheduleError("a recurring time has no seconds: use HH:MM")
            return Timing.on_cron(f"{minute} {hour} * * {days}"), skip + 1 + found[1]
        if group not in ("day", "daily"):
            raise ScheduleError(f'"every {group}" needs a time of day, e.g. "every {group} 9:00"')
    if skip and group in _UNITS and len(group) > 2:  # every hour, every day, every week
        return Timing.every(_UNITS[group]), 2
    delay = read_delay(words, skip)
    if delay is None:
        return None
    return Timing.every(int(delay[0].total_seconds())), skip + delay[1]
