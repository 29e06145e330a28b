"""Cron in a timezone, DST both ways: the library's time math, which the kernel's
manifest scheduler and the scheduler extension share (one copy), and the
extension's user-facing wrappers around it."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from core.extensions import sdk
from sandbox.extensions.scheduler import when

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")

NEXT_FIRE = [sdk.next_fire, when.next_cron]
TO_INSTANT = [sdk.to_instant]


def fires(next_fire, expr, start, zone, count):
    out, moment = [], start
    for _ in range(count):
        moment = next_fire(expr, moment, zone)
        out.append(moment.astimezone(zone))
    return out


@pytest.mark.parametrize("next_fire", NEXT_FIRE)
def test_weekday_cron_in_two_timezones(next_fire):
    start = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)  # a Friday
    berlin = fires(next_fire, "0 9 * * 1-5", start, BERLIN, 2)
    new_york = fires(next_fire, "0 9 * * 1-5", start, NEW_YORK, 2)
    assert [d.isoformat() for d in berlin] == [
        "2024-03-04T09:00:00+01:00",
        "2024-03-05T09:00:00+01:00",
    ]
    # 12:00 UTC is 07:00 in New York: Friday's 09:00 there is still ahead
    assert [d.isoformat() for d in new_york] == [
        "2024-03-01T09:00:00-05:00",
        "2024-03-04T09:00:00-05:00",
    ]


@pytest.mark.parametrize("next_fire", NEXT_FIRE)
@pytest.mark.parametrize(
    ("zone", "start", "day"),
    [
        # 02:00 -> 03:00: 02:30 does not exist on these days
        (BERLIN, datetime(2024, 3, 30, 12, tzinfo=UTC), "2024-03-31"),
        (NEW_YORK, datetime(2024, 3, 9, 12, tzinfo=UTC), "2024-03-10"),
    ],
)
def test_spring_forward_fires_at_the_first_valid_instant(next_fire, zone, start, day):
    got = fires(next_fire, "30 2 * * *", start, zone, 3)
    assert got[0].strftime("%Y-%m-%d %H:%M") == f"{day} 03:00"  # the end of the gap
    assert [d.strftime("%H:%M") for d in got[1:]] == ["02:30", "02:30"]
    assert len({d.date() for d in got}) == 3  # one fire per day


@pytest.mark.parametrize("next_fire", NEXT_FIRE)
@pytest.mark.parametrize(
    ("zone", "start", "day"),
    [
        (BERLIN, datetime(2024, 10, 26, 12, tzinfo=UTC), "2024-10-27"),
        (NEW_YORK, datetime(2024, 11, 2, 12, tzinfo=UTC), "2024-11-03"),
    ],
)
def test_fall_back_fires_a_daily_schedule_once(next_fire, zone, start, day):
    # 01:30 happens twice in New York and 02:30 twice in Berlin on these days
    expr = "30 2 * * *" if zone is BERLIN else "30 1 * * *"
    got = fires(next_fire, expr, start, zone, 3)
    on_day = [d for d in got if d.strftime("%Y-%m-%d") == day]
    assert len(on_day) == 1
    assert on_day[0].fold == 0 and on_day[0].dst() != on_day[0].replace(fold=1).dst()
    assert len({d.date() for d in got}) == 3


@pytest.mark.parametrize("to_instant", TO_INSTANT)
def test_wall_times_map_to_instants_across_dst(to_instant):
    gap = to_instant(datetime(2024, 3, 31, 2, 30), BERLIN)
    assert gap == datetime(2024, 3, 31, 1, 0, tzinfo=UTC)  # 03:00 CEST
    ambiguous = to_instant(datetime(2024, 10, 27, 2, 30), BERLIN)
    assert ambiguous == datetime(2024, 10, 27, 0, 30, tzinfo=UTC)  # the first (CEST) 02:30
    plain = to_instant(datetime(2024, 7, 1, 9, 0), NEW_YORK)
    assert plain == datetime(2024, 7, 1, 13, 0, tzinfo=UTC)


def test_a_cron_that_never_fires_is_a_clear_error():
    with pytest.raises(sdk.CronError, match='"0 9 31 2 \\*" never fires'):
        sdk.next_fire("0 9 31 2 *", datetime(2024, 1, 1, tzinfo=UTC), BERLIN)
    with pytest.raises(when.ScheduleError, match="never fires"):
        when.next_cron("0 9 31 2 *", datetime(2024, 1, 1, tzinfo=UTC), BERLIN)


def test_interval_keeps_its_phase_and_skips_missed_runs():
    due = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
    assert sdk.next_interval(due, 600, due) == datetime(2024, 1, 1, 9, 10, tzinfo=UTC)
    late = datetime(2024, 1, 1, 10, 5, tzinfo=UTC)
    assert sdk.next_interval(due, 600, late) == datetime(2024, 1, 1, 10, 10, tzinfo=UTC)


def test_local_zone_follows_tz_with_its_dst_rules(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    zone = sdk.resolve_zone("local")
    assert zone.utcoffset(datetime(2024, 1, 15)) != zone.utcoffset(datetime(2024, 7, 15))
