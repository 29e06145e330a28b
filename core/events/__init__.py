"""Durable event bus: ``EventBus`` over a ``Journal`` (``SQLiteJournal`` by default)."""

from core.events.bus import EventBus
from core.events.errors import (
    BusStateError,
    EventBusError,
    JournalError,
    PayloadError,
    PayloadTooLargeError,
    TopicError,
)
from core.events.journal import DeadLetter, DeliveryInfo, EventRecord, Journal
from core.events.models import Event
from core.events.sqlite_journal import SQLiteJournal
from core.events.topics import SystemTopics, topic_matches

__all__ = [
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
    "SystemTopics",
    "TopicError",
    "topic_matches",
]
