"""The channel's settings (``extensions.telegram_channel.*``), validated once.

Values come from the manifest's ``config`` overridden by settings.yaml or
``HEARTH__EXTENSIONS__TELEGRAM_CHANNEL__...``; a bad value is an error that
names the key and the value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.extensions.sdk import ChannelConfigError, listed

PREFIX = "extensions.telegram_channel"


class ConfigError(ChannelConfigError):
    """A setting of the Telegram channel has a value it cannot use."""

    prefix = PREFIX


@dataclass(frozen=True, slots=True)
class TelegramConfig:
    """``allowed_user_ids`` keeps the configured order: the first one is whom a
    proactive message without a target reaches when ``default_chat_id`` is unset."""

    allowed_user_ids: tuple[int, ...]
    allowed_group_chat_ids: frozenset[int]
    default_chat_id: int | None
    api_base_url: str | None
    poll_timeout_s: int
    edit_interval_s: float


def parse_config(get: Callable[[str, Any], Any]) -> TelegramConfig:
    """Build the config from ``ctx.get_config``; raises ``ConfigError``."""
    return TelegramConfig(
        allowed_user_ids=tuple(dict.fromkeys(_ids("allowed_user_ids", get))),
        allowed_group_chat_ids=frozenset(_group_ids(get)),
        default_chat_id=_optional_int("default_chat_id", get("default_chat_id", None)),
        api_base_url=_base_url(get("api_base_url", None)),
        poll_timeout_s=int(_number("poll_timeout_s", get("poll_timeout_s", 30), minimum=0)),
        edit_interval_s=_number("edit_interval_s", get("edit_interval_s", 1.0), minimum=0.0),
    )


def _ids(key: str, get: Callable[[str, Any], Any]) -> list[int]:
    """A list of Telegram ids: a YAML list, one number, or ``"[1, 2]"`` / ``"1,2"``
    from the environment."""
    ids = []
    for item in listed(key, get(key, []), "Telegram ids", ConfigError, one_number=True):
        number = _optional_int(key, item)
        if number is None:
            raise ConfigError(key, f"{item!r} is not a Telegram id")
        ids.append(number)
    return ids


def _group_ids(get: Callable[[str, Any], Any]) -> list[int]:
    key = "allowed_group_chat_ids"
    ids = _ids(key, get)
    for chat_id in ids:
        if chat_id >= 0:
            raise ConfigError(
                key,
                f"{chat_id} is not a group chat id: group ids are negative "
                "(e.g. -1001234567890; the log names a group the bot ignores)",
            )
    return ids


def _optional_int(key: str, value: Any) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ConfigError(key, f"{value!r} is not an integer id")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value.strip())
    raise ConfigError(key, f"{value!r} is not an integer id")


def _number(key: str, value: Any, *, minimum: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(key, f"{value!r} is not a number") from None
    if number < minimum:
        raise ConfigError(key, f"{value!r} must be at least {minimum:g}")
    return number


def _base_url(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not re.match(r"^https?://", value):
        raise ConfigError("api_base_url", f"{value!r} is not an http(s) URL ending in /bot")
    return value
