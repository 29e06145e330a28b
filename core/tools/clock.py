"""The user's wall clock: ``settings.timezone`` ("local" or an IANA name) to aware datetimes."""

from __future__ import annotations

from datetime import datetime, tzinfo

from core.extensions.sdk import resolve_zone

__all__ = ["now_at", "now_in", "offset_label", "resolve_timezone", "timezone_label"]

# ``local`` is the host's zone with its DST rules; anything else an IANA name.
resolve_timezone = resolve_zone


def now_in(timezone: str) -> datetime:
    return datetime.now(resolve_timezone(timezone))


def now_at(zone: tzinfo) -> datetime:
    """The time now in a zone resolved once (``local`` costs file reads to resolve)."""
    return datetime.now(zone)


def timezone_label(timezone: str, at: datetime | None = None) -> str:
    """``Europe/Berlin (CEST, UTC+02:00)`` or ``local (CET, UTC+01:00)``."""
    moment = at or now_in(timezone)
    return f"{timezone} ({offset_label(timezone, moment)})"


def offset_label(timezone: str, moment: datetime) -> str:
    """What of ``timezone`` changes with the date: ``CEST, UTC+02:00`` (``UTC+00:00``
    for UTC itself, whose abbreviation is its name)."""
    offset = moment.strftime("%z")
    utc = f"UTC{offset[:3]}:{offset[3:]}" if offset else "UTC"
    abbrev = moment.tzname() or ""
    return f"{abbrev}, {utc}" if abbrev and abbrev != timezone else utc
