"""The /remind grammar (SPEC §8) and the times tools accept, with a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from sandbox.extensions.scheduler.model import ScheduleError
from sandbox.extensions.scheduler.when import parse_at, parse_every, parse_remind

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2024, 5, 10, 12, 0, tzinfo=UTC)  # 14:00 in Berlin


@pytest.mark.parametrize(
    ("when", "delay"),
    [
        ("45s", timedelta(seconds=45)),
        ("10m", timedelta(minutes=10)),
        ("2h30m", timedelta(hours=2, minutes=30)),
        ("1d", timedelta(days=1)),
    ],
)
def test_delays(when, delay):
    timing, text = parse_remind(f"{when} tea is ready", NOW, BERLIN)
    assert timing.kind == "once" and timing.at == NOW + delay
    assert text == "tea is ready"


def test_clock_time_is_today_if_ahead_else_tomorrow():
    later, _ = parse_remind("18:30 call Anna", NOW, BERLIN)
    assert later.at.astimezone(BERLIN).isoformat() == "2024-05-10T18:30:00+02:00"
    earlier, _ = parse_remind("09:15 stand-up", NOW, BERLIN)
    assert earlier.at.astimezone(BERLIN).isoformat() == "2024-05-11T09:15:00+02:00"
    exactly_now, _ = parse_remind("14:00 now?", NOW, BERLIN)
    assert exactly_now.at.astimezone(BERLIN).date().isoformat() == "2024-05-11"


def test_quoted_cron_is_recurring():
    timing, text = parse_remind('"0 9 * * 1-5" tell me my plan', NOW, BERLIN)
    assert (timing.kind, timing.cron, text) == ("cron", "0 9 * * 1-5", "tell me my plan")
    single, _ = parse_remind("'*/15 * * * *' stretch", NOW, BERLIN)
    assert single.cron == "*/15 * * * *"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("10x tea", 'can\'t read "10x" as a time; try 10m, in 2 hours, 18:30, 9am'),
        ("10m", "what should I remind you of?"),
        ("", "usage: /remind WHEN TEXT"),
        ("25:00 late", '"25:00" is not a time of day'),
        ("0s now", '"0s" is not a delay'),
        ('"61 * * * *" x', '"61 * * * *" is not a valid cron expression'),
        ('"0 9 31 2 *" never', 'cron expression "0 9 31 2 *" never fires'),
        ('"0 9 * * 1-5 plan', "has no closing"),
    ],
)
def test_bad_input_is_one_line_naming_the_problem(args, message):
    with pytest.raises(ScheduleError) as caught:
        parse_remind(args, NOW, BERLIN)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_dates_for_tools():
    at = parse_at("2024-05-11 08:00", NOW, BERLIN)
    assert at.astimezone(BERLIN).isoformat() == "2024-05-11T08:00:00+02:00"
    with_offset = parse_at("2024-05-11T08:00:00Z", NOW, BERLIN)
    assert with_offset == datetime(2024, 5, 11, 8, 0, tzinfo=UTC)
    # inside Berlin's spring-forward gap: the first valid instant
    gap = parse_at("2025-03-30 02:30", NOW, BERLIN)
    assert gap.astimezone(BERLIN).isoformat() == "2025-03-30T03:00:00+02:00"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2024-02-30 10:00", '"2024-02-30" is not a real date: day is out of range'),
        ("2024-13-01 10:00", "month must be in 1..12"),
        ("2024-05-10 13:59", '"2024-05-10 13:59" is in the past (it is now 2024-05-10 14:00'),
        ("next tuesday", '"next tuesday" needs a time of day'),
        ("someday", 'can\'t read "someday" as a time; try'),
    ],
)
def test_impossible_and_past_dates_are_rejected(text, message):
    with pytest.raises(ScheduleError, match=None) as caught:
        parse_at(text, NOW, BERLIN)
    assert message in str(caught.value)


def test_intervals():
    assert parse_every("90s") == 90
    assert parse_every("1h30m") == 5400
    with pytest.raises(ScheduleError, match="as an interval"):
        parse_every("often")
