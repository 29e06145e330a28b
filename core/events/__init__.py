"""Durable event bus: ``EventBus`` over a ``Journal`` (``SQLiteJournal`` by default).

The door is lazy (PEP 562): ``from core.events import EventBus`` works as
always, but importing a light submodule such as ``core.events.models``
(``Event``) or ``core.events.topics`` does not load the bus, its journal or
aiosqlite. The plugin host and the extension contract rely on that
(ADR 0015); the ``TYPE_CHECKING`` imports give type checkers the real names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime import lazy_door

if TYPE_CHECKING:
    from core.events.bus import EventBus
    from core.events.errors import (
        BusStateError,
        EventBusError,
        JournalError,
        PayloadError,
        PayloadTooLargeError,
        SystemPayloadError,
        TopicError,
    )
    from core.events.journal import DeadLetter, DeliveryInfo, EventRecord, Journal
    from core.events.models import Event
    from core.events.sqlite_journal import SQLiteJournal
    from core.events.system_payloads import (
        AgentBackground,
        AgentTask,
        SystemPayload,
        UserMessage,
        UserNotify,
        read_system_payload,
    )
    from core.events.topics import SystemTopics, topic_matches

__all__ = [
    "AgentBackground",
    "AgentTask",
    "BusStateError",
    "DeadLetter",
    "DeliveryInfo",
    "Event",
    "EventBus",
    "EventBusError",
    "EventRecord",
    "Journal",
    "JournalError",
    "PayloadError",
    "PayloadTooLargeError",
    "SQLiteJournal",
    "SystemPayload",
    "SystemPayloadError",
    "SystemTopics",
    "TopicError",
    "UserMessage",
    "UserNotify",
    "read_system_payload",
    "topic_matches",
]

_HOMES = {
    "EventBus": "bus",
    "BusStateError": "errors",
    "EventBusError": "errors",
    "JournalError": "errors",
    "PayloadError": "errors",
    "PayloadTooLargeError": "errors",
    "TopicError": "errors",
    "DeadLetter": "journal",
    "DeliveryInfo": "journal",
    "EventRecord": "journal",
    "Journal": "journal",
    "Event": "models",
    "SQLiteJournal": "sqlite_journal",
    "SystemPayloadError": "errors",
    "AgentBackground": "system_payloads",
    "AgentTask": "system_payloads",
    "SystemPayload": "system_payloads",
    "UserMessage": "system_payloads",
    "UserNotify": "system_payloads",
    "read_system_payload": "system_payloads",
    "SystemTopics": "topics",
    "topic_matches": "topics",
}


__getattr__, __dir__ = lazy_door(__name__, globals(), _HOMES, __all__)
