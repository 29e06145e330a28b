"""Exceptions of the event bus; one base class so callers can catch them all."""

from __future__ import annotations

from core.runtime.errors import HearthError

__all__ = [
    "BusStateError",
    "DeliveryDeferred",
    "EventBusError",
    "JournalError",
    "PayloadError",
    "PayloadTooLargeError",
    "SystemPayloadError",
    "TopicError",
]


class EventBusError(HearthError):
    """Base class of every error raised by ``core.events``."""


class TopicError(EventBusError, ValueError):
    """A topic or subscription pattern is malformed."""


class PayloadError(EventBusError, ValueError):
    """A payload is not a JSON object; nothing was stored."""

    def __init__(self, topic: str, reason: str) -> None:
        super().__init__(f"payload for topic {topic!r} must be a JSON object: {reason}")
        self.topic = topic
        self.reason = reason


class SystemPayloadError(PayloadError):
    """A system-topic payload does not fit its model (SPEC §3); nothing was stored.

    ``field`` is the key at fault (empty when the payload is not an object).
    """

    def __init__(self, topic: str, field: str, reason: str) -> None:
        where = f"key {field!r} " if field else ""
        ValueError.__init__(self, f"payload for system topic {topic!r}: {where}{reason}")
        self.topic = topic
        self.field = field
        self.reason = reason


class PayloadTooLargeError(PayloadError):
    """A payload's JSON is larger than ``events.max_payload_bytes``; nothing was stored.

    A cap for every publisher keeps one extension from filling the journal
    (and every subscriber's memory) with a few huge events.
    """

    def __init__(self, topic: str, size: int, limit: int) -> None:
        reason = f"{size} bytes of JSON, over the limit of {limit} (events.max_payload_bytes)"
        EventBusError.__init__(self, f"payload for topic {topic!r} is too large: {reason}")
        self.topic = topic
        self.reason = reason
        self.size = size
        self.limit = limit


class JournalError(EventBusError):
    """The journal file cannot be opened or has an incompatible schema."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class BusStateError(EventBusError, RuntimeError):
    """An operation does not fit the bus's lifecycle (e.g. a duplicate subscriber id)."""


class DeliveryDeferred(EventBusError):
    """Raised by a handler to give its delivery back to the journal, uncharged.

    The delivery is pending again with its attempt undone and is claimed anew,
    oldest first, by whichever process claims next. The kernel's router raises
    it when a message of a conversation finds an earlier one of the same
    conversation taken back from a dead process (ADR 0039): that one must run
    first, and it is only claimed by a process with nothing else in hand.
    """
