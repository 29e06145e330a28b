"""Everyday reminder requests in the person's own words, answered without a model.

"Remind me in 2 minutes to water the plants.", "Remind me to call mom
tomorrow at 9am", "Erinnere mich in 10 Minuten an den Tee", "What are my
reminders?", "Cancel reminder 3" are answered at once (issue 47, as Home
Assistant's Assist answers its sentence templates before any model): a small
local model took minutes for the first and then set no reminder. A sentence is
taken only when its time reads whole with the ``/remind`` phrases
(``phrases.py``; German times are put into those words first); anything else
goes to the model as before (``None``). ``extensions.scheduler.local_first:
false`` turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, tzinfo

from core.extensions.contract import TurnContext

from .commands import parse_id, set_reminder
from .describe import describe_all
from .model import ScheduleError, Timing
from .scheduler import HeldNotices, Scheduler
from .when import parse_phrase

__all__ = ["ReminderSentences", "german_time"]

_END = r"\s*[.!?]*\s*"
REMIND_EN = re.compile(
    r"(?:please\s+|can you\s+|could you\s+)?remind me\s+(?P<body>.+?)" + _END, re.IGNORECASE
)
REMIND_DE = re.compile(r"(?:bitte\s+)?erinnere?\s+mich\s+(?P<body>.+?)" + _END, re.IGNORECASE)
# "in 2 minutes to water the plants": the time, a joining word, the text
JOIN_EN = re.compile(r"\s+(?:to|that|about|of)\s+", re.IGNORECASE)
JOIN_DE = re.compile(r"\s*,?\s+(?:daran\s*,?\s*(?:dass\s+)?|an\s+|dass\s+)", re.IGNORECASE)
LIST = re.compile(
    r"(?:what are|show(?: me)?|list|which are) (?:all )?my reminders"
    + _END
    + r"|(?:do i have )?any reminders"
    + _END
    + r"|(?:zeig(?:e)?(?: mir)?|welche sind) (?:alle )?meine erinnerungen"
    + _END
    + r"|welche erinnerungen habe ich"
    + _END,
    re.IGNORECASE,
)
CANCEL = re.compile(
    r"(?:please\s+)?(?:cancel|delete|remove) (?:the )?reminder #?(?P<id>\d+)"
    + _END
    + r"|(?:bitte\s+)?(?:lösche|entferne) (?:die )?erinnerung #?(?P<id2>\d+)"
    + _END
    + r"|erinnerung #?(?P<id3>\d+) (?:löschen|entfernen)"
    + _END,
    re.IGNORECASE,
)

_GERMAN_UNITS = {
    "sekunde": "seconds",
    "sekunden": "seconds",
    "minute": "minutes",
    "minuten": "minutes",
    "stunde": "hours",
    "stunden": "hours",
    "tag": "days",
    "tagen": "days",
    "tage": "days",
    "woche": "weeks",
    "wochen": "weeks",
}
_GERMAN_DAYS = {
    "montag": "monday",
    "dienstag": "tuesday",
    "mittwoch": "wednesday",
    "donnerstag": "thursday",
    "freitag": "friday",
    "samstag": "saturday",
    "sonntag": "sunday",
}
_GERMAN_WORDS = {"morgen": "tomorrow", "heute": "today", "einer": "1", "einem": "1", "eine": "1"}


def german_time(phrase: str) -> str:
    """``in 10 Minuten`` → ``in 10 minutes``, ``morgen um 9 Uhr`` → ``tomorrow 9:00``,
    ``jeden Montag um 8:30`` → ``every monday 8:30``: German times in the words the
    ``/remind`` phrases read."""
    text = phrase.lower().strip()
    text = re.sub(r"\bjeden werktag\b|\bwerktags\b", "every weekday", text)
    text = re.sub(r"\bjeden tag\b|\btäglich\b", "every day", text)
    text = re.sub(r"\bjede stunde\b|\bstündlich\b", "every hour", text)
    text = re.sub(r"\bjeden (\w+)\b", lambda m: f"every {_GERMAN_DAYS.get(m[1], m[1])}", text)
    text = re.sub(r"\bum (\d{1,2})(?::(\d{2}))? uhr\b", lambda m: f"{m[1]}:{m[2] or '00'}", text)
    text = re.sub(r"\bum (\d{1,2}):(\d{2})\b", r"\1:\2", text)
    text = re.sub(r"\b(\d{1,2}) uhr\b", r"\1:00", text)
    words = [
        _GERMAN_UNITS.get(w) or _GERMAN_DAYS.get(w) or _GERMAN_WORDS.get(w) or w
        for w in text.split()
    ]
    return " ".join(words)


class ReminderSentences:
    """Answers reminder sentences for one scheduler (``answer``: the reply or ``None``)."""

    def __init__(self, scheduler: Scheduler, held: HeldNotices) -> None:
        self._scheduler = scheduler
        self._held = held

    async def answer(self, text: str, turn: TurnContext) -> str | None:
        said = " ".join(text.split())
        scheduler = self._scheduler
        if found := REMIND_EN.fullmatch(said):
            read = _time_and_text(found["body"], JOIN_EN, str, scheduler.now(), scheduler.zone)
        elif found := REMIND_DE.fullmatch(said):
            body = found["body"]
            read = _time_and_text(body, JOIN_DE, german_time, scheduler.now(), scheduler.zone)
        elif LIST.fullmatch(said):
            person = turn.person_key
            waiting = await scheduler.waiting(person, self._held)
            return describe_all(
                await scheduler.list(person), scheduler.zone, scheduler.now(), waiting
            )
        elif found := CANCEL.fullmatch(said):
            number = found["id"] or found["id2"] or found["id3"]
            try:
                schedule = await scheduler.cancel(parse_id(number), turn.person_key)
            except ScheduleError as exc:
                return str(exc)
            return f"Cancelled reminder #{schedule.id}: {schedule.text}"
        else:
            return None
        if read is None:
            return None  # no time that reads whole: the model may understand it
        try:
            return await set_reminder(scheduler, *read, turn)
        except ScheduleError as exc:
            return str(exc)


def _time_and_text(
    body: str, join: re.Pattern[str], convert: Callable[[str], str], now: datetime, zone: tzinfo
) -> tuple[Timing, str] | None:
    """The timing and the text of ``body``: ``TIME JOIN TEXT`` or ``JOIN TEXT TIME``
    (``to call mom tomorrow 9am``); ``None`` unless one reading takes the time whole."""
    for joined in join.finditer(body):
        when, what = body[: joined.start()], body[joined.end() :]
        if when and what and (timing := _timing(convert(when), now, zone)) is not None:
            return timing, what.strip()
    leading = join.match(" " + body)
    if leading is None:
        return None
    rest = body[leading.end() - 1 :].split()
    for cut in range(1, len(rest)):
        timing = _timing(convert(" ".join(rest[cut:])), now, zone)
        if timing is not None:
            return timing, " ".join(rest[:cut])
    return None


def _timing(phrase: str, now: datetime, zone: tzinfo) -> Timing | None:
    try:
        return parse_phrase(phrase.removeprefix("at ").strip(), now, zone)
    except ScheduleError:
        return None
