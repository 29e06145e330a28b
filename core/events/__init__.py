"""Durable event bus: ``EventBus`` over a ``Journal`` (``SQLiteJournal`` by default).

The door is lazy (PEP 562): ``from core.events import EventBus`` works as
always, but importing a light submodule such as ``core.events.models``
(``Event``) or ``core.events.topics`` does not load the bus, its journal or
aiosqlite. The plugin host and the extension contract rely on that
(ADR 0015); the ``TYPE_CHECKING`` imports give type checkers the real names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.events.bus import EventBus as EventBus
    from core.events.errors import (
        BusStateError as BusStateError,
        EventBusError as EventBusError,
        JournalError as JournalError,
        PayloadError as PayloadError,
        PayloadTooLargeError as PayloadTooLargeError,
        SystemPayloadError as SystemPayloadError,
        TopicError as TopicError,
    )
    from core.events.journal import (
        DeadLetter as DeadLetter,
        DeliveryInfo as DeliveryInfo,
        EventRecord as EventRecord,
        Journal as Journal,
    )
    from core.events.models import Event as Event
    from core.events.sqlite_journal import SQLiteJournal as SQLiteJournal
    from core.events.system_payloads import (
        AgentBackground as AgentBackground,
        AgentTask as AgentTask,
        SystemPayload as SystemPayload,
        UserMessage as UserMessage,
        UserNotify as UserNotify,
        read_system_payload as read_system_payload,
    )
    from core.events.topics import (
        SystemTopics as SystemTopics,
        topic_matches as topic_matches,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
