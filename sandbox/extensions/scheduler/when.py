"""The one reader of reminder times: ``/remind``, the tools and ``schedule()`` use it.

``/remind WHEN TEXT`` (SPEC §8, widened by issue 18): WHEN is any phrase
``phrases.read_time`` reads at the start of the arguments — a delay
(``45s``, ``in 10 minutes``), a clock time (``18:30``, ``9am``), a day or
date and a time (``tomorrow 9:00``, ``mon 10:00``, ``dec 1 9:00``,
``2026-12-01 09:00``), a recurring phrase (``every weekday 8:30``,
``every 2h``) — or a quoted cron expression. Every failure is a
``ScheduleError`` whose one-line message names the input and the accepted forms.
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo

from core.extensions.sdk import CronError, check_cron as _check_cron, next_fire, wall

from .model import ScheduleError, Timing
from .phrases import read_delay, read_time, unreadable

USAGE = (
    "usage: /remind WHEN TEXT, e.g. /remind 10m tea, /remind tomorrow 9:00 call mom,"
    ' /remind every weekday 8:30 stand-up, /remind "0 9 * * 1-5" plan'
)
_WORD_RE = re.compile(r"\S+")


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
        spans = list(_WORD_RE.finditer(args))
        found = read_time([m.group() for m in spans], now, zone)
        if found is None:
            raise unreadable(spans[0].group())
        timing, used = found
        text = args[spans[used - 1].end() :].strip()
    if not text:
        raise ScheduleError(f"what should I remind you of? {USAGE}")
    return timing, text


def parse_phrase(text: str, now: datetime, zone: tzinfo) -> Timing:
    """A whole phrase (nothing after the time) → its timing; for the tools' arguments."""
    words = text.split()
    if text.strip()[:1] in ("'", '"'):
        return Timing.on_cron(check_cron(text.strip().strip("'\"")))
    found = read_time(words, now, zone) if words else None
    if found is None or found[1] != len(words):
        raise unreadable(text.strip())
    return found[0]


def parse_at(text: str, now: datetime, zone: tzinfo) -> datetime:
    """A one-shot instant from any one-shot phrase (``2026-12-01 09:00``, ``tomorrow 9am``,
    ``18:30``, ``in 2h``); times in the past are errors."""
    timing = parse_phrase(text, now, zone)
    if timing.kind != "once" or timing.at is None:
        raise ScheduleError(f'"{text}" repeats; a one-shot time is e.g. "tomorrow 9:00"')
    if timing.at <= now:
        raise ScheduleError(
            f'"{text}" is in the past (it is now {wall(now, zone):%Y-%m-%d %H:%M} {zone})'
        )
    return timing.at


def parse_when(text: str, now: datetime, zone: tzinfo) -> datetime:
    """A delay (``20m``, ``in 2 hours``) or any other one-shot phrase → the due instant."""
    return parse_at(text, now, zone)


def parse_recurring(text: str, now: datetime, zone: tzinfo) -> Timing:
    """``2h``, ``every 2h``, ``day 9:00``, ``every weekday 8:30`` → cron or interval timing."""
    phrase = text.strip()
    if not phrase.lower().startswith(("every ", "daily ", "'", '"')):
        try:
            return parse_phrase(f"every {phrase}", now, zone)
        except ScheduleError as exc:
            try:
                once = parse_phrase(phrase, now, zone)
            except ScheduleError:
                raise exc from None
            if once.kind == "once":
                raise ScheduleError(
                    f'"{text}" happens once; a recurring time is e.g. "every day 9:00"'
                ) from None
            return once
    timing = parse_phrase(phrase, now, zone)
    if timing.kind == "once":
        raise ScheduleError(f'"{text}" happens once; a recurring time is e.g. "every day 9:00"')
    return timing


def parse_every(text: str) -> int:
    """``30m`` → 1800 seconds, for recurring schedules at a fixed interval."""
    words = text.split()
    delay = read_delay([w.lower() for w in words], 0) if words else None
    if delay is None or delay[1] != len(words):
        raise ScheduleError(f'can\'t read "{text}" as an interval (45s, 10m, 2h30m, 1d)')
    return int(delay[0].total_seconds())
