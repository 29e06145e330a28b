"""Reminder times as people type them (issue 18): one table, a fixed "now" in
Europe/Berlin the day before the spring-forward change, so DST is on the table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from core.extensions.sdk import wall
from core.extensions.sdk.testing import FakeContext
from sandbox.extensions.scheduler.commands import build_commands
from sandbox.extensions.scheduler.describe import rule_text
from sandbox.extensions.scheduler.firing import following_due
from sandbox.extensions.scheduler.model import Schedule, ScheduleError
from sandbox.extensions.scheduler.scheduler import Scheduler
from sandbox.extensions.scheduler.store import ScheduleStore
from sandbox.extensions.scheduler.when import (
    next_cron,
    parse_at,
    parse_recurring,
    parse_remind,
    parse_when,
)
from support.scheduler_helpers import FakeClock

BERLIN = ZoneInfo("Europe/Berlin")
# Saturday 2026-03-28 10:00 in Berlin (CET, +01:00); clocks go forward 02:00 → 03:00 tomorrow
NOW = datetime(2026, 3, 28, 9, 0, tzinfo=UTC)

PHRASES = [
    # delays (SPEC §8) and "in ..."
    ("45s", "2026-03-28T10:00:45+01:00"),
    ("10m", "2026-03-28T10:10:00+01:00"),
    ("2h30m", "2026-03-28T12:30:00+01:00"),
    ("90s", "2026-03-28T10:01:30+01:00"),
    ("1d", "2026-03-29T11:00:00+02:00"),  # 24 real hours: 11:00 after the clocks went forward
    ("in 2h", "2026-03-28T12:00:00+01:00"),
    ("in 10 minutes", "2026-03-28T10:10:00+01:00"),
    ("in 1 hour 30 min", "2026-03-28T11:30:00+01:00"),
    ("in an hour", "2026-03-28T11:00:00+01:00"),
    ("in 2 hours and 15 minutes", "2026-03-28T12:15:00+01:00"),
    ("in 3 days", "2026-03-31T11:00:00+02:00"),
    # clock times: today if still ahead, else tomorrow
    ("18:30", "2026-03-28T18:30:00+01:00"),
    ("09:15", "2026-03-29T09:15:00+02:00"),
    ("9am", "2026-03-29T09:00:00+02:00"),
    ("9 am", "2026-03-29T09:00:00+02:00"),
    ("9pm", "2026-03-28T21:00:00+01:00"),
    ("at 18:30", "2026-03-28T18:30:00+01:00"),
    ("noon", "2026-03-28T12:00:00+01:00"),
    ("12am", "2026-03-29T00:00:00+01:00"),
    # a day and a time
    ("tomorrow 9:00", "2026-03-29T09:00:00+02:00"),
    ("tomorrow 9am", "2026-03-29T09:00:00+02:00"),
    ("Tomorrow at 7:45pm", "2026-03-29T19:45:00+02:00"),
    ("tomorrow 2:30", "2026-03-29T03:00:00+02:00"),  # inside the gap: the first instant after
    ("today 18:00", "2026-03-28T18:00:00+01:00"),
    ("tonight 11pm", "2026-03-28T23:00:00+01:00"),
    ("mon 10:00", "2026-03-30T10:00:00+02:00"),
    ("monday 10:00", "2026-03-30T10:00:00+02:00"),
    ("fri 9am", "2026-04-03T09:00:00+02:00"),
    ("sat 18:00", "2026-03-28T18:00:00+01:00"),  # today is Saturday and 18:00 is ahead
    ("sat 8:00", "2026-04-04T08:00:00+02:00"),  # today's 08:00 has passed: next week
    ("next sat 18:00", "2026-04-04T18:00:00+02:00"),
    ("on sunday at 9:30", "2026-03-29T09:30:00+02:00"),
    # dates
    ("2026-12-01 09:00", "2026-12-01T09:00:00+01:00"),
    ("2026-12-01T09:00", "2026-12-01T09:00:00+01:00"),
    ("2026-04-01T09:00Z", "2026-04-01T11:00:00+02:00"),
    ("dec 1 9:00", "2026-12-01T09:00:00+01:00"),
    ("1 dec 9:00", "2026-12-01T09:00:00+01:00"),
    ("December 1st at 9am", "2026-12-01T09:00:00+01:00"),
    ("mar 1 9:00", "2027-03-01T09:00:00+01:00"),  # this year's has passed
    # recurring: a local wall time on days (cron), or an interval
    ("every day 9:00", ("cron", "0 9 * * *")),
    ("every weekday 8:30", ("cron", "30 8 * * 1-5")),
    ("every monday 10:00", ("cron", "0 10 * * 1")),
    ("every sunday at 6pm", ("cron", "0 18 * * 0")),
    ("every weekend 10:00", ("cron", "0 10 * * 0,6")),
    ("daily 7:15", ("cron", "15 7 * * *")),
    ('"0 9 * * 1-5"', ("cron", "0 9 * * 1-5")),
    ("every 2h", ("interval", 7200)),
    ("every 30 minutes", ("interval", 1800)),
    ("every hour", ("interval", 3600)),
    ("every day", ("interval", 86400)),
]


@pytest.mark.parametrize(("phrase", "expected"), PHRASES, ids=[p for p, _ in PHRASES])
def test_phrase_table(phrase, expected):
    timing, text = parse_remind(f"{phrase} call mom", NOW, BERLIN)
    assert text == "call mom"
    if isinstance(expected, str):
        assert timing.kind == "once"
        assert timing.at.astimezone(BERLIN).isoformat() == expected
    elif expected[0] == "cron":
        assert (timing.kind, timing.cron) == expected
    else:
        assert (timing.kind, timing.every_s) == expected


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ("18:30 2 eggs and milk", "2 eggs and milk"),
        ("in 2h 3 eggs", "3 eggs"),
        ("10m a day off", "a day off"),
        ("tomorrow 9:00 at the office", "at the office"),
        ("every day 9:00 take 2 pills", "take 2 pills"),
        ('"0 9 * * 1-5"   plan  the day', "plan  the day"),
    ],
)
def test_the_text_after_the_time_is_kept_as_typed(args, text):
    assert parse_remind(args, NOW, BERLIN)[1] == text


def test_the_table_is_at_least_forty_phrases():
    assert len(PHRASES) >= 40


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("someday call mom", 'can\'t read "someday" as a time; try 10m, in 2 hours, 18:30'),
        ("tomorrow call mom", '"tomorrow" needs a time of day, e.g. "tomorrow 9:00"'),
        ("monday call mom", '"monday" needs a time of day'),
        ("every weekday stand-up", '"every weekday" needs a time of day'),
        ("feb 30 9:00 x", '"feb 30" is not a real date'),
        ("13pm x", '"13pm" is not a time of day'),
        ("today 9:00 x", "is in the past"),
        ("in 0 minutes x", "is not a delay: it must be longer than 0 s"),
        ("every 0s x", "is not a delay"),
    ],
)
def test_unreadable_or_impossible_times_say_what_is_accepted(args, message):
    with pytest.raises(ScheduleError) as caught:
        timing, _ = parse_remind(args, NOW, BERLIN)
        if timing.kind == "once" and timing.at <= NOW:  # the scheduler's own check
            raise ScheduleError(f"{wall(timing.at, BERLIN)} is in the past")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_spring_forward_gap_moves_forward_and_says_so():
    timing, _ = parse_remind("tomorrow 2:30 call mom", NOW, BERLIN)
    assert timing.at.astimezone(BERLIN).isoformat() == "2026-03-29T03:00:00+02:00"
    assert timing.note == (
        "02:30 does not exist on 2026-03-29 (the clocks go forward), so it is set for 03:00"
    )
    assert parse_remind("tomorrow 9:00 x", NOW, BERLIN)[0].note == ""


def test_fall_back_ambiguous_time_is_its_first_occurrence():
    saturday = datetime(2026, 10, 24, 8, 0, tzinfo=UTC)  # clocks go back 03:00 → 02:00 tomorrow
    timing, _ = parse_remind("tomorrow 2:30 x", saturday, BERLIN)
    assert timing.at.astimezone(BERLIN).isoformat() == "2026-10-25T02:30:00+02:00"


def _fires(expr: str, after: datetime, count: int) -> list[str]:
    fires = []
    for _ in range(count):
        after = next_cron(expr, after, BERLIN)
        fires.append(after.astimezone(BERLIN).isoformat())
    return fires


def test_every_day_stays_at_nine_local_across_both_dst_changes():
    timing, _ = parse_remind("every day 9:00 vitamins", NOW, BERLIN)
    assert _fires(timing.cron, NOW, 3) == [
        "2026-03-29T09:00:00+02:00",
        "2026-03-30T09:00:00+02:00",
        "2026-03-31T09:00:00+02:00",
    ]
    october = datetime(2026, 10, 24, 8, 0, tzinfo=UTC)
    assert _fires(timing.cron, october, 2) == [
        "2026-10-25T09:00:00+01:00",
        "2026-10-26T09:00:00+01:00",
    ]


def test_recurring_phrases_follow_the_existing_rules_on_restart():
    """A phrase becomes the store's cron or interval: firing late catches up once."""
    timing, _ = parse_remind("every weekday 8:30 stand-up", NOW, BERLIN)
    schedule = Schedule(
        1,
        "stand-up",
        "cron",
        timing.cron,
        "Europe/Berlin",
        datetime(2026, 3, 30, 6, 30, tzinfo=UTC),
        None,
        "notify",
        "reminder.due",
        NOW,
        None,
        0,
        "active",
    )
    down_until = datetime(2026, 4, 1, 12, 0, tzinfo=UTC)  # missed Mon, Tue, Wed
    following = following_due(schedule, schedule.next_due, down_until)
    assert following.astimezone(BERLIN).isoformat() == "2026-04-02T08:30:00+02:00"
    assert rule_text(schedule) == "every weekday 08:30"


def test_the_tools_read_the_same_phrases():
    assert parse_at("tomorrow 9am", NOW, BERLIN) == parse_when("tomorrow 9:00", NOW, BERLIN)
    assert parse_when("in 10 minutes", NOW, BERLIN) == NOW + timedelta(minutes=10)
    assert parse_when("20m", NOW, BERLIN) == NOW + timedelta(minutes=20)
    assert parse_recurring("weekday 8:30", NOW, BERLIN).cron == "30 8 * * 1-5"
    assert parse_recurring("every monday 10:00", NOW, BERLIN).cron == "0 10 * * 1"
    assert parse_recurring("2h", NOW, BERLIN).every_s == 7200
    with pytest.raises(ScheduleError, match="repeats"):
        parse_at("every day 9:00", NOW, BERLIN)
    with pytest.raises(ScheduleError, match="happens once"):
        parse_recurring("tomorrow 9:00", NOW, BERLIN)
    with pytest.raises(ScheduleError, match="can't read"):
        parse_at("tomorrow 9:00 and more", NOW, BERLIN)


async def test_remind_command_confirms_and_names_the_dst_shift(tmp_path):
    store = ScheduleStore(tmp_path / "schedules.db")
    await store.open()
    try:
        scheduler = Scheduler(store, "Europe/Berlin", FakeClock(NOW), lambda: None)
        commands = build_commands(scheduler, FakeContext(tmp_path).held_notices)
        remind = next(c for c in commands if c.name == "remind")
        reply = await remind.handler("tomorrow 2:30 call mom", _turn())
        assert reply == (
            "Reminder #1 set for tomorrow 03:00 (02:30 does not exist on 2026-03-29 "
            "(the clocks go forward), so it is set for 03:00): call mom"
        )
        reply = await remind.handler("every weekday 8:30 stand-up", _turn())
        assert reply == (
            "Reminder #2 set (every weekday 08:30), first Mon 2026-03-30 08:30: stand-up"
        )
        reply = await remind.handler("whenever call mom", _turn())
        assert reply.startswith('can\'t read "whenever" as a time; try ')
    finally:
        await store.close()


def _turn():
    from core.extensions.contract import TurnContext

    return TurnContext(channel_id="cli", user_id="u1", session_id="s1")
