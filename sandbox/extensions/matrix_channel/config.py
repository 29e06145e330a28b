"""The channel's settings (``extensions.matrix_channel.*``), validated once.

Values come from the manifest's ``config`` overridden by settings.yaml or
``HEARTH__EXTENSIONS__MATRIX_CHANNEL__...``; a bad value is an error that
names the key and the value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.extensions.sdk import ChannelConfigError, listed

PREFIX = "extensions.matrix_channel"
USER_ID_RE = re.compile(r"^@[^:\s]+:\S+$")
ROOM_ID_RE = re.compile(r"^!\S+$")  # room version 12 ids have no server part


class ConfigError(ChannelConfigError):
    """A setting of the Matrix channel has a value it cannot use."""

    prefix = PREFIX


@dataclass(frozen=True, slots=True)
class MatrixConfig:
    """``allowed_user_ids`` keeps the configured order: the first one's direct room
    is where a proactive message without a target goes when ``default_room_id`` is unset."""

    homeserver_url: str | None
    allowed_user_ids: tuple[str, ...]
    allowed_room_ids: frozenset[str]
    default_room_id: str | None
    sync_timeout_s: float
    edit_interval_s: float


def parse_config(get: Callable[[str, Any], Any]) -> MatrixConfig:
    """Build the config from ``ctx.get_config``; raises ``ConfigError``."""
    default_room = get("default_room_id", None) or None
    if default_room is not None and not ROOM_ID_RE.match(str(default_room)):
        raise ConfigError("default_room_id", f"{default_room!r} is not a room id (!abc...)")
    return MatrixConfig(
        homeserver_url=_url(get("homeserver_url", None)),
        allowed_user_ids=tuple(dict.fromkeys(_ids("allowed_user_ids", get, USER_ID_RE))),
        allowed_room_ids=frozenset(_ids("allowed_room_ids", get, ROOM_ID_RE)),
        default_room_id=default_room,
        sync_timeout_s=_number("sync_timeout_s", get("sync_timeout_s", 30), minimum=1.0),
        edit_interval_s=_number("edit_interval_s", get("edit_interval_s", 1.0), minimum=0.0),
    )


def _ids(key: str, get: Callable[[str, Any], Any], pattern: re.Pattern[str]) -> list[str]:
    """A list of Matrix ids: a YAML list, one id, or ``'["@a:x", "@b:y"]'`` /
    ``"@a:x,@b:y"`` from the environment."""
    value = listed(key, get(key, []), "Matrix ids", ConfigError)
    for item in value:
        if not isinstance(item, str) or not pattern.match(item):
            example = "@alice:example.org" if pattern is USER_ID_RE else "!abc:example.org"
            raise ConfigError(key, f"{item!r} is not a Matrix id like {example}")
    return list(value)


def _number(key: str, value: Any, *, minimum: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(key, f"{value!r} is not a number") from None
    if number < minimum:
        raise ConfigError(key, f"{value!r} must be at least {minimum:g}")
    return number


def _url(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not re.match(r"^https?://\S+$", value):
        raise ConfigError(
            "homeserver_url", f"{value!r} is not an http(s) URL (e.g. https://matrix.example.org)"
        )
    return value.rstrip("/")
