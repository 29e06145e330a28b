"""The user's timezone setting (``local`` or an IANA name) as a DST-aware ``tzinfo``.

Standard library only: settings validation, the kernel's manifest
scheduler, the clock tool and the scheduler extension share this one
resolver, and the plugin host can import it without loading anything heavy.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from core.runtime.errors import HearthError

__all__ = ["UnknownTimezoneError", "local_zone", "resolve_zone"]


class UnknownTimezoneError(HearthError, ValueError):
    """A timezone setting that is neither ``local`` nor a known IANA name."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"unknown timezone {name!r}: use 'local' or an IANA name such as Europe/Berlin"
        )
        self.name = name


def resolve_zone(name: str) -> tzinfo:
    """``local`` (the host's zone, with its DST rules) or an IANA name."""
    if name == "local":
        return local_zone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UnknownTimezoneError(name) from exc


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
    fallback = datetime.now().astimezone().tzinfo
    return fallback if fallback is not None else UTC
