"""Time math for schedules: cron fires across DST, intervals, late notes.

croniter walks local wall-clock time (naive datetimes); each wall time is
then mapped to an instant. A wall time inside a spring-forward gap fires at
the first valid instant after the gap; an ambiguous fall-back time fires at
its first occurrence only, so a daily schedule fires exactly once that day.
Intervals count real elapsed seconds and ignore DST. Instants are aware UTC
datetimes throughout. croniter is imported on first use, so importing the
library stays cheap for a plugin host that never needs cron.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

from core.runtime.errors import HearthError

__all__ = [
    "CronError",
    "check_cron",
    "late_note",
    "next_fire",
    "next_interval",
    "to_instant",
    "utc_now",
    "wall",
]

_MAX_SKIPS = 10_000  # candidates skipped at most (one repeated DST hour of a per-second cron)


class CronError(HearthError, ValueError):
    """A cron expression is invalid or never fires; the one-line message names it."""

    def __init__(self, expr: str, reason: str) -> None:
        super().__init__(reason)
        self.expr = expr


def utc_now() -> datetime:
    """The current instant, aware UTC: the default clock wherever a clock is injectable."""
    return datetime.now(UTC)


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
    """``expr`` with its white space folded, or ``CronError`` saying why it is not usable."""
    from croniter import croniter

    expr = " ".join(expr.split())
    if not croniter.is_valid(expr):
        raise CronError(
            expr,
            f'"{expr}" is not a valid cron expression '
            '(minute hour day-of-month month day-of-week, e.g. "0 9 * * 1-5")',
        )
    return expr


def next_fire(expr: str, after: datetime, zone: tzinfo) -> datetime:
    """The first fire of ``expr`` (wall times in ``zone``) strictly after the instant ``after``."""
    from croniter import croniter
    from croniter.croniter import CroniterError

    try:
        walls = croniter(expr, wall(after, zone))
        for _ in range(_MAX_SKIPS):
            candidate = to_instant(walls.get_next(datetime), zone)
            if candidate > after:
                return candidate
    except CroniterError as exc:
        raise CronError(expr, f'cron expression "{expr}" never fires ({exc})') from exc
    raise CronError(expr, f'cron expression "{expr}" has no fire time after {after.isoformat()}')


def next_interval(due: datetime, every_s: int, now: datetime) -> datetime:
    """``due + k * every_s`` for the smallest ``k >= 1`` that lands after ``now``."""
    step = timedelta(seconds=every_s)
    missed = max(0, int((now - due) / step))
    following = due + step * (missed + 1)
    while following <= now:
        following += step
    return following


def late_note(due: datetime, now: datetime, zone: tzinfo, grace_s: float) -> str:
    """``" (late: due 09:00)"`` when ``now`` is more than ``grace_s`` after ``due``, else ``""``.

    The date is added when the fire was due on another local day.
    """
    if (now - due).total_seconds() <= grace_s:
        return ""
    local_due = wall(due, zone)
    fmt = "%H:%M" if local_due.date() == wall(now, zone).date() else "%Y-%m-%d %H:%M"
    return f" (late: due {local_due.strftime(fmt)})"
