"""The channel's settings (``extensions.slack_channel.*``), validated once.

Values come from the manifest's ``config`` overridden by settings.yaml or
``HEARTH__EXTENSIONS__SLACK_CHANNEL__...``; a bad value is an error that names
the key and the value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.extensions.sdk import ChannelConfigError, listed

PREFIX = "extensions.slack_channel"
USER_ID_RE = re.compile(r"^[UW][A-Z0-9]{2,}$")  # Slack member ids: U... (W... on Enterprise Grid)
CHANNEL_ID_RE = re.compile(r"^[CG][A-Z0-9]{2,}$")  # public (C...) and private (G...) channels


class ConfigError(ChannelConfigError):
    """A setting of the Slack channel has a value it cannot use."""

    prefix = PREFIX


@dataclass(frozen=True, slots=True)
class SlackConfig:
    """``allowed_user_ids`` keeps the configured order: the first one is whose DM a
    proactive message without a target reaches when ``default_address`` is unset."""

    allowed_user_ids: tuple[str, ...]
    allowed_channel_ids: frozenset[str]
    default_address: str | None
    api_base_url: str | None
    edit_interval_s: float


def parse_config(get: Callable[[str, Any], Any]) -> SlackConfig:
    """Build the config from ``ctx.get_config``; raises ``ConfigError``."""
    users = _ids("allowed_user_ids", get, USER_ID_RE, "a Slack member id (U0123ABCD)")
    channels = _ids("allowed_channel_ids", get, CHANNEL_ID_RE, "a Slack channel id (C0123ABCD)")
    return SlackConfig(
        allowed_user_ids=tuple(dict.fromkeys(users)),
        allowed_channel_ids=frozenset(channels),
        default_address=_default(get("default_address", None)),
        api_base_url=_base_url(get("api_base_url", None)),
        edit_interval_s=_number("edit_interval_s", get("edit_interval_s", 1.0), minimum=0.0),
    )


def id_list(key: str, value: Any, pattern: re.Pattern[str], what: str) -> list[str]:
    """A list of Slack ids: a YAML list, one id, or ``"[U1, U2]"`` / ``"U1,U2"``
    from the environment; ``ConfigError`` names an id that is not ``what``."""
    if isinstance(value, str) and value.strip().startswith("[") and '"' not in value:
        value = re.findall(r"[A-Za-z0-9]+", value)  # "[U1, U2]": ids unquoted, not JSON
    ids = []
    for item in listed(key, value, "Slack ids", ConfigError):
        if not isinstance(item, str) or not pattern.match(item.strip()):
            raise ConfigError(key, f"{item!r} is not {what}")
        ids.append(item.strip())
    return ids


def _ids(
    key: str, get: Callable[[str, Any], Any], pattern: re.Pattern[str], what: str
) -> list[str]:
    return id_list(key, get(key, []), pattern, what)


def _default(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    text = str(value).strip()
    channel, _, thread = text.partition("/")
    if not (USER_ID_RE.match(channel) or CHANNEL_ID_RE.match(channel)) or (
        thread and not re.fullmatch(r"\d+\.\d+", thread)
    ):
        raise ConfigError(
            "default_address",
            f"{value!r} is not a Slack member id (U...) or channel id (C...)",
        )
    return text


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
    if not isinstance(value, str) or not re.match(r"^https?://.+/$", value):
        raise ConfigError("api_base_url", f"{value!r} is not an http(s) URL ending in /api/")
    return value
