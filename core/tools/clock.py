"""The user's wall clock: ``settings.timezone`` ("local" or an IANA name) to aware datetimes."""

from __future__ import annotations

from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["now_in", "resolve_timezone", "timezone_label"]


def resolve_timezone(name: str) -> tzinfo:
    """``local`` is the host's zone; anything else must be an IANA name (else ``ValueError``)."""
    if name == "local":
        local = datetime.now().astimezone().tzinfo
        assert local is not None  # astimezone() always returns an aware datetime
        return local
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown timezone {name!r}: use 'local' or an IANA name such as Europe/Berlin"
        ) from exc


def now_in(timezone: str) -> datetime:
    return datetime.now(resolve_timezone(timezone))


def timezone_label(timezone: str, at: datetime | None = None) -> str:
    """``Europe/Berlin (CEST, UTC+02:00)`` or ``local (CET, UTC+01:00)``."""
    moment = at or now_in(timezone)
    offset = moment.strftime("%z")
    utc = f"UTC{offset[:3]}:{offset[3:]}" if offset else "UTC"
    abbrev = moment.tzname() or ""
    details = f"{abbrev}, {utc}" if abbrev and abbrev != timezone else utc
    return f"{timezone} ({details})"
