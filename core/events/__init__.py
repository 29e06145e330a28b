"""Durable event bus: ``EventBus`` over a ``Journal`` (``SQLiteJournal`` by default)."""

from core.events.bus import EventBus
from core.events.errors import (
    BusStateError,
    EventBusError,
    JournalError,
    PayloadError,
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
