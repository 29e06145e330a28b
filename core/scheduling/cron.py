"""Cron in a timezone: the next fire instant, with the DST rules users expect.

croniter walks local wall-clock time (naive datetimes); this module maps each
wall time to an instant. A wall time inside a spring-forward gap fires at the
first valid instant after the gap; an ambiguous fall-back time fires at its
first occurrence only, so a daily schedule fires exactly once that day.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

from croniter import croniter
from croniter.croniter import CroniterError

from core.timezones import local_zone, resolve_zone

__all__ = ["CronError", "local_zone", "next_fire", "resolve_zone", "to_instant"]

_MAX_SKIPS = 10_000  # candidates skipped at most (one repeated DST hour of a per-second cron)


class CronError(ValueError):
    """A cron expression is invalid or never fires; the message names it."""


def to_instant(wall: datetime, zone: tzinfo) -> datetime:
    """The UTC instant of the naive local ``wall`` time (gap → gap end; ambiguous → first)."""
    first = wall.replace(tzinfo=zone, fold=0)
    if _wall(first, zone) == wall:
        return first.astimezone(UTC)
    a = first.astimezone(UTC)
    b = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    lo, hi = min(a, b), max(a, b)
    while hi - lo > timedelta(seconds=1):  # the first instant whose wall time is >= wall
        mid = lo + (hi - lo) / 2
        if _wall(mid, zone) >= wall:
            hi = mid
        else:
            lo = mid
    return hi.replace(microsecond=0)


def next_fire(expr: str, after: datetime, zone: tzinfo) -> datetime:
    """The first fire of ``expr`` (in ``zone``) strictly after the instant ``after`` (UTC)."""
    try:
        walls = croniter(expr, _wall(after, zone))
        for _ in range(_MAX_SKIPS):
            candidate = to_instant(walls.get_next(datetime), zone)
            if candidate > after:
                return candidate
    except CroniterError as exc:
        raise CronError(f"cron expression {expr!r}: {exc}") from exc
    raise CronError(f"cron expression {expr!r}: no fire time found after {after.isoformat()}")


def _wall(moment: datetime, zone: tzinfo) -> datetime:
    return moment.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
