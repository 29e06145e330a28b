"""The channel's settings (``extensions.http_api.*``), checked once at initialize."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PREFIX = "extensions.http_api"
# a message is journaled as a bus event, which may hold events.max_payload_bytes
# (256 KiB by default) of JSON: the message's JSON, and room for the event's other fields
MAX_MESSAGE_BYTES = 250_000


class ApiConfigError(ValueError):
    """A setting that cannot work; the message names the key and the value."""


@dataclass(frozen=True, slots=True)
class ApiConfig:
    host: str
    port: int
    max_body_bytes: int
    max_message_bytes: int
    body_timeout_s: float
    header_timeout_s: float
    max_connections: int
    max_inflight: int
    reply_timeout_s: float
    default_conversation: str
    web_conversation: str
    notifications_keep: int

    @property
    def listen(self) -> str:
        return host_port(self.host, self.port)


def parse_config(get: Callable[[str, Any], Any]) -> ApiConfig:
    host, port = parse_listen(str(get("listen", "127.0.0.1:8765")))
    return ApiConfig(
        host=host,
        port=port,
        max_body_bytes=_positive(get, "max_body_bytes", 1_048_576),
        max_message_bytes=_positive(get, "max_message_bytes", MAX_MESSAGE_BYTES),
        body_timeout_s=float(_positive(get, "body_timeout_s", 60)),
        header_timeout_s=float(_positive(get, "header_timeout_s", 10)),
        max_connections=_positive(get, "max_connections", 256),
        max_inflight=_positive(get, "max_inflight", 64),
        reply_timeout_s=float(_positive(get, "reply_timeout_s", 300)),
        default_conversation=str(get("default_conversation", "api")),
        web_conversation=str(get("web_conversation", "web")),
        notifications_keep=_positive(get, "notifications_keep", 1000),
    )


def parse_listen(text: str) -> tuple[str, int]:
    """``127.0.0.1:8765``, ``[::1]:8765`` or ``localhost:8765`` → (host, port)."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ApiConfigError(f"{PREFIX}.listen: {text!r} is not HOST:PORT (e.g. 127.0.0.1:8765)")
    return host, int(port_text)


def host_port(host: str, port: int) -> str:
    """``127.0.0.1:8765``, ``[::1]:8765``: an address as a URL names it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _positive(get: Callable[[str, Any], Any], key: str, default: float) -> Any:
    value = get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ApiConfigError(f"{PREFIX}.{key}: must be a positive number, got {value!r}")
    return value
