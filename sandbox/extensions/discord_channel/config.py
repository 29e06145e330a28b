"""The channel's settings (``extensions.discord_channel.*``), validated once.

Values come from the manifest's ``config`` overridden by settings.yaml or
``HEARTH__EXTENSIONS__DISCORD_CHANNEL__...``; a bad value is an error that
names the key and the value. Discord ids are snowflakes: 64-bit numbers,
written in YAML as numbers or strings (JavaScript clients quote them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.extensions.sdk import ChannelConfigError, listed

PREFIX = "extensions.discord_channel"
DEFAULT_API_BASE = "https://discord.com/api/v10"


class ConfigError(ChannelConfigError):
    """A setting of the Discord channel has a value it cannot use."""

    prefix = PREFIX


@dataclass(frozen=True, slots=True)
class DiscordConfig:
    """``allowed_user_ids`` keeps the configured order: the first one is whose DM a
    proactive message without a target reaches when ``default_user_id`` is unset."""

    allowed_user_ids: tuple[int, ...]
    allowed_channel_ids: frozenset[int]
    default_user_id: int | None
    api_base_url: str
    edit_interval_s: float


def parse_config(get: Callable[[str, Any], Any]) -> DiscordConfig:
    """Build the config from ``ctx.get_config``; raises ``ConfigError``."""
    return DiscordConfig(
        allowed_user_ids=tuple(dict.fromkeys(ids("allowed_user_ids", get("allowed_user_ids", [])))),
        allowed_channel_ids=frozenset(ids("allowed_channel_ids", get("allowed_channel_ids", []))),
        default_user_id=_optional_id("default_user_id", get("default_user_id", None)),
        api_base_url=_base_url(get("api_base_url", None)),
        edit_interval_s=_number("edit_interval_s", get("edit_interval_s", 1.0)),
    )


def ids(key: str, value: Any) -> list[int]:
    """A list of Discord ids: a YAML list, one id, or ``"[1, 2]"`` / ``"1,2"`` from
    the environment."""
    found = []
    for item in listed(key, value, "Discord ids", ConfigError, one_number=True):
        number = _optional_id(key, item)
        if number is None:
            raise ConfigError(key, f"{item!r} is not a Discord id")
        found.append(number)
    return found


def _optional_id(key: str, value: Any) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and re.fullmatch(r"\d{1,20}", value.strip()):
        return int(value.strip())
    raise ConfigError(key, f"{value!r} is not a Discord id (a positive number, a snowflake)")


def _number(key: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(key, f"{value!r} is not a number") from None
    if number < 0:
        raise ConfigError(key, f"{value!r} must be at least 0")
    return number


def _base_url(value: Any) -> str:
    if value is None or value == "":
        return DEFAULT_API_BASE
    if not isinstance(value, str) or not re.match(r"^https?://\S+$", value):
        raise ConfigError(
            "api_base_url", f"{value!r} is not an http(s) URL (like {DEFAULT_API_BASE})"
        )
    return value.rstrip("/")
