"""The event record handed to subscribers.

A frozen dataclass: handlers read it, nothing downstream may mutate it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    """One journaled event as seen by a subscriber.

    ``created_at`` is Unix time in seconds (float, UTC). ``attempt`` counts
    deliveries of this event to the receiving subscriber, starting at 1.
    """

    id: int
    topic: str
    source: str
    payload: dict[str, Any] = field(default_factory=dict)
    correlation_id: str | None = None
    created_at: float = 0.0
    attempt: int = 1
