"""The event record handed to subscribers.

A frozen dataclass: handlers read it, nothing downstream may mutate it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, init=False)
class Event:
    """One journaled event as seen by a subscriber.

    ``created_at`` is Unix time in seconds (float, UTC). ``attempt`` counts
    deliveries of this event to the receiving subscriber, starting at 1.
    """

    id: int
    topic: str
    source: str
    payload: dict[str, Any]
    correlation_id: str | None
    created_at: float
    attempt: int

    def __init__(
        self,
        id: int,
        topic: str,
        source: str,
        payload: dict[str, Any] | None = None,
        correlation_id: str | None = None,
        created_at: float = 0.0,
        attempt: int = 1,
    ) -> None:
        # One is built per delivery on the bus's hot path: setting the slots
        # directly costs half of the generated frozen ``__init__`` (ADR 0071).
        _set_id(self, id)
        _set_topic(self, topic)
        _set_source(self, source)
        _set_payload(self, {} if payload is None else payload)
        _set_correlation_id(self, correlation_id)
        _set_created_at(self, created_at)
        _set_attempt(self, attempt)


# the slots' member descriptors: a direct set is what the frozen class cannot do itself
_set_id = Event.__dict__["id"].__set__
_set_topic = Event.__dict__["topic"].__set__
_set_source = Event.__dict__["source"].__set__
_set_payload = Event.__dict__["payload"].__set__
_set_correlation_id = Event.__dict__["correlation_id"].__set__
_set_created_at = Event.__dict__["created_at"].__set__
_set_attempt = Event.__dict__["attempt"].__set__
