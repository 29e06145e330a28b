"""Time math for schedules: the user's zone, cron fires across DST, intervals.

croniter walks local wall-clock time; each wall time is then mapped to an
instant. A wall time inside a spring-forward gap fires at the first valid
instant after the gap; an ambiguous fall-back time fires at its first
occurrence only, so a daily schedule fires exactly once that day. Intervals
count real elapsed seconds and ignore DST.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from croniter.croniter import CroniterError

from .model import ScheduleError

_MAX_SKIPS = 10_000  # candidates skipped at most (one repeated DST hour of a per-second cron)


def resolve_zone(name: str) -> tzinfo:
    """``local`` (the host's zone, with its DST rules) or an IANA name."""
    if name == "local":
        return local_zone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(
            f"unknown timezone {name!r}: use 'local' or an IANA name such as Europe/Berlin"
        ) from exc


def local_zone() -> tzinfo:
    """The host's zone as a ``ZoneInfo`` (DST-aware), not a fixed UTC offset."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz:
        try:
            return ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    link = Path("/etc/localtime")
    target = str(link.resolve()) if link.exists() else ""
    if "zoneinfo/" in target:
        try:
            return ZoneInfo(target.split("zoneinfo/", 1)[1])
        except (ZoneInfoNotFoundError, ValueError):
            pass
    if link.is_file():
        with link.open("rb") as handle:
            return ZoneInfo.from_file(handle, key="localtime")
    return datetime.now().astimezone().tzinfo or UTC


def wall(moment: datetime, zone: tzinfo) -> datetime:
    """The naive local wall-clock time of the instant ``moment`` in ``zone``."""
    return moment.astimezone(UTC).astimezone(zone).replace(tzinfo=None)


def to_instant(local: datetime, zone: tzinfo) -> datetime:
    """The UTC instant of the naive wall time ``local`` (gap → gap end; ambiguous → first)."""
    first = local.replace(tzinfo=zone, fold=0)
    if wall(first, zone) == local:
        return first.astimezone(UTC)
    a = first.astimezone(UTC)
    b = local.replace(tzinfo=zone, fold=1).astimezone(UTC)
    lo, hi = min(a, b), max(a, b)
    while hi - lo > timedelta(seconds=1):  # the first instant whose wall time is >= local
        mid = lo + (hi - lo) / 2
        if wall(mid, zone) >= local:
            hi = mid
        else:
            lo = mid
    return hi.replace(microsecond=0)


def check_cron(expr: str) -> str:
    """``expr`` stripped, or ``ScheduleError`` saying why it is not a usable cron expression."""
    expr = " ".join(expr.split())
    if not croniter.is_valid(expr):
        raise ScheduleError(
            f'"{expr}" is not a valid cron expression '
            '(minute hour day-of-month month day-of-week, e.g. "0 9 * * 1-5")'
        )
    return expr


def next_cron(expr: str, after: datetime, zone: tzinfo) -> datetime:
    """The first fire of ``expr`` in ``zone`` strictly after the instant ``after``."""
    try:
        walls = croniter(expr, wall(after, zone))
        for _ in range(_MAX_SKIPS):
            candidate = to_instant(walls.get_next(datetime), zone)
            if candidate > after:
                return candidate
    except CroniterError as exc:
        raise ScheduleError(f'cron expression "{expr}" never fires ({exc})') from exc
    raise ScheduleError(f'cron expression "{expr}" has no fire time after {after.isoformat()}')


def next_interval(due: datetime, every_s: int, now: datetime) -> datetime:
    """``due + k * every_s`` for the smallest ``k >= 1`` that lands after ``now``."""
    step = timedelta(seconds=every_s)
    missed = max(0, int((now - due) / step))
    following = due + step * (missed + 1)
    while following <= now:
        following += step
    return following
