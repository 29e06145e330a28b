"""One subscriber's in-memory state: its queue, its workers' work in hand, its flags.

Each subscriber has its own queue and worker tasks, so a slow handler only
ever delays its own subscriber (no head-of-line blocking across subscribers).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from core.events.models import Event

__all__ = ["PREFETCH", "DeliveryQueue", "EventHandler", "Subscription"]

EventHandler = Callable[[Event], Awaitable[None]]

# Deliveries a subscriber may hold claimed beyond its running handlers. Claiming
# ahead saves a commit per event; a crash charges these an attempt, so keep it small.
PREFETCH = 64


class DeliveryQueue:
    """The FIFO a subscriber's workers share; ``None`` tells one worker to stop.

    Lighter than ``asyncio.Queue`` (no task accounting, no bound): a put is an
    append and wakes at most one idle worker, so a delivery to a subscriber with
    many workers (a turn: ``turns.concurrency``) does not wake them all only for
    all but one to go back to sleep (issue 29's profile: 32 wake-ups per turn).
    """

    def __init__(self) -> None:
        self._items: deque[Event | None] = deque()
        self._idle: deque[asyncio.Future[None]] = deque()  # workers waiting, oldest first

    def __len__(self) -> int:
        return len(self._items)

    def get_nowait(self) -> Event | None:
        """The oldest item; only when ``len(self)`` says there is one (no coroutine)."""
        return self._items.popleft()

    def put(self, item: Event | None) -> None:
        self._items.append(item)
        self._wake_one()

    async def get(self) -> Event | None:
        while not self._items:
            waiter = asyncio.get_running_loop().create_future()
            self._idle.append(waiter)
            try:
                await waiter
            except BaseException:
                waiter.cancel()
                if waiter in self._idle:
                    self._idle.remove(waiter)
                elif self._items:  # woken, then cancelled: the wake-up is passed on
                    self._wake_one()
                raise
        return self._items.popleft()

    def _wake_one(self) -> None:
        while self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def take_all(self) -> list[Event | None]:
        items = list(self._items)
        self._items.clear()
        return items


@dataclass(eq=False, slots=True)
class Subscription:
    """A subscriber registered with this bus (``id`` is its durable identity)."""

    id: str
    pattern: str
    handler: EventHandler
    concurrency: int
    timeout: float | None
    queue: DeliveryQueue = field(default_factory=DeliveryQueue)
    running: dict[int, Event] = field(default_factory=dict)
    workers: list[asyncio.Task[None]] = field(default_factory=list)
    reserved: int = 0  # claimed in a commit that has not come back yet
    registered: bool = False  # its cursor is in the journal
    backlog: bool = True  # the journal may hold due pending deliveries for it
    blocked: bool = False  # a recovered delivery waits until nothing else is in hand
    solo: bool = False  # a recovered delivery is in hand: claim nothing else meanwhile

    @property
    def in_hand(self) -> int:
        return len(self.queue) + len(self.running) + self.reserved

    @property
    def room(self) -> int:
        """How many more deliveries it may claim now."""
        return self.concurrency + PREFETCH - self.in_hand

    def wants_claim(self) -> bool:
        if not self.backlog or self.solo or self.room <= 0:
            return False
        return not (self.blocked and self.in_hand > 0)
