"""The channel's settings (``extensions.email_channel.*``), validated once.

Values come from the manifest's ``config`` overridden by settings.yaml or
``HEARTH__EXTENSIONS__EMAIL_CHANNEL__...``; a bad value is an error that
names the key and the value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.extensions.sdk import ChannelConfigError, listed

PREFIX = "extensions.email_channel"
ADDRESS_RE = re.compile(r"^[^@\s<>\"',;]+@[^@\s<>\"',;]+\.[^@\s<>\"',;]+$")
IMAP_SECURITY = ("ssl", "none")  # aioimaplib has no STARTTLS: port 993 or a plain local server
SMTP_SECURITY = ("starttls", "ssl", "none")
_DEFAULT_PORTS = {
    ("imap", "ssl"): 993,
    ("imap", "none"): 143,
    ("smtp", "starttls"): 587,
    ("smtp", "ssl"): 465,
    ("smtp", "none"): 25,
}


class ConfigError(ChannelConfigError):
    """A setting of the e-mail channel has a value it cannot use."""

    prefix = PREFIX


@dataclass(frozen=True, slots=True)
class EmailConfig:
    """``allowed_senders`` keeps the configured order: the first one is whom a
    message with no address goes to when ``default_to`` is unset."""

    address: str | None  # the channel's own mailbox (From: of every mail it sends)
    username: str | None  # the IMAP/SMTP login (else ``address``)
    imap_host: str | None
    imap_port: int
    imap_security: str
    mailbox: str
    smtp_host: str | None
    smtp_port: int
    smtp_security: str
    allowed_senders: tuple[str, ...]
    default_to: str | None
    idle: bool
    poll_interval_s: float
    idle_refresh_s: float

    @property
    def login(self) -> str | None:
        return self.username or self.address

    @property
    def complete(self) -> bool:
        """Whether the mailbox and both servers are named (the password is a secret)."""
        return bool(self.address and self.imap_host and self.smtp_host)


def parse_config(get: Callable[[str, Any], Any]) -> EmailConfig:
    """Build the config from ``ctx.get_config``; raises ``ConfigError``."""
    imap_security = _choice("imap_security", get("imap_security", "ssl"), IMAP_SECURITY)
    smtp_security = _choice("smtp_security", get("smtp_security", "starttls"), SMTP_SECURITY)
    default_to = get("default_to", None) or None
    if default_to is not None:
        default_to = normal_address("default_to", default_to)
    address = get("address", None) or None
    return EmailConfig(
        address=normal_address("address", address) if address else None,
        username=str(get("username", None) or "") or None,
        imap_host=_host(get("imap_host", None)),
        imap_port=_port("imap_port", get("imap_port", None), ("imap", imap_security)),
        imap_security=imap_security,
        mailbox=str(get("mailbox", "INBOX") or "INBOX"),
        smtp_host=_host(get("smtp_host", None)),
        smtp_port=_port("smtp_port", get("smtp_port", None), ("smtp", smtp_security)),
        smtp_security=smtp_security,
        allowed_senders=tuple(dict.fromkeys(address_list("allowed_senders", get))),
        default_to=default_to,
        idle=_flag("idle", get("idle", True)),
        poll_interval_s=_number("poll_interval_s", get("poll_interval_s", 60), minimum=1.0),
        idle_refresh_s=_number("idle_refresh_s", get("idle_refresh_s", 600), minimum=1.0),
    )


def normal_address(key: str, value: Any) -> str:
    """An e-mail address, lowercased (addresses are compared so)."""
    text = str(value).strip().lower()
    if not ADDRESS_RE.match(text):
        raise ConfigError(key, f"{value!r} is not an e-mail address like alice@example.org")
    return text


def address_list(key: str, get: Callable[[str, Any], Any]) -> list[str]:
    """A list of addresses: a YAML list, one address, or ``'["a@x.org"]'`` /
    ``"a@x.org,b@y.org"`` from the environment."""
    return [
        normal_address(key, item)
        for item in listed(key, get(key, []), "e-mail addresses", ConfigError)
    ]


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in allowed:
        raise ConfigError(key, f"{value!r} is not one of {', '.join(allowed)}")
    return text


def _host(value: Any) -> str | None:
    return str(value).strip() or None if value else None


def _port(key: str, value: Any, default_of: tuple[str, str]) -> int:
    if value is None or value == "":
        return _DEFAULT_PORTS[default_of]
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ConfigError(key, f"{value!r} is not a port number") from None
    if not 0 < port < 65536:
        raise ConfigError(key, f"{value!r} is not a port number (1-65535)")
    return port


def _flag(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise ConfigError(key, f"{value!r} is not true or false")


def _number(key: str, value: Any, *, minimum: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(key, f"{value!r} is not a number") from None
    if number < minimum:
        raise ConfigError(key, f"{value!r} must be at least {minimum:g}")
    return number
