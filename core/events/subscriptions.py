"""One subscriber's in-memory state: its queue, its workers' work in hand, its flags.

Each subscriber has its own queue and worker tasks, so a slow handler only
ever delays its own subscriber (no head-of-line blocking across subscribers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from core.events.models import Event

__all__ = ["PREFETCH", "EventHandler", "Subscription"]

EventHandler = Callable[[Event], Awaitable[None]]

# Deliveries a subscriber may hold claimed beyond its running handlers. Claiming
# ahead saves a commit per event; a crash charges these an attempt, so keep it small.
PREFETCH = 64


@dataclass(eq=False, slots=True)
class Subscription:
    """A subscriber registered with this bus (``id`` is its durable identity)."""

    id: str
    pattern: str
    handler: EventHandler
    concurrency: int
    timeout: float | None
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)
    running: dict[int, Event] = field(default_factory=dict)
    workers: list[asyncio.Task[None]] = field(default_factory=list)
    reserved: int = 0  # claimed in a commit that has not come back yet
    registered: bool = False  # its cursor is in the journal
    backlog: bool = True  # the journal may hold due pending deliveries for it
    blocked: bool = False  # a recovered delivery waits until nothing else is in hand
    solo: bool = False  # a recovered delivery is in hand: claim nothing else meanwhile

    @property
    def in_hand(self) -> int:
        return self.queue.qsize() + len(self.running) + self.reserved

    @property
    def room(self) -> int:
        """How many more deliveries it may claim now."""
        return self.concurrency + PREFETCH - self.in_hand

    def wants_claim(self) -> bool:
        if not self.backlog or self.solo or self.room <= 0:
            return False
        return not (self.blocked and self.in_hand > 0)
