"""The journal interface: what the bus needs from durable storage.

The bus talks to storage only in *batches*: one ``WriteBatch`` holds every
publish, handler outcome, subscriber registration and claim that queued up
while the previous batch was being committed, and the journal applies it in
one transaction ("group commit"). SQLite is the embedded backend; a
PostgreSQL journal implements the same protocol with the same semantics.

Delivery rows are kept per (event, subscriber). Status moves
``pending -> inflight -> done | pending (retry) | dead``; ``attempt`` is the
number of claims so far, persisted at claim time.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from core.events.models import Event

__all__ = [
    "PROCESS_DIED",
    "BatchResult",
    "ClaimRequest",
    "ClaimResult",
    "DeadLetter",
    "DeliveryInfo",
    "DeliveryStatus",
    "EventRecord",
    "Journal",
    "NewEvent",
    "Outcome",
    "Registration",
    "WakeupSource",
    "WriteBatch",
]

DeliveryStatus = Literal["pending", "inflight", "done", "dead"]

PROCESS_DIED = "process died while handling"


@dataclass(slots=True)
class NewEvent:
    """One publish. ``claimed_by`` subscribers get an in-flight delivery (attempt 1)
    that the bus hands over in memory; ``queued_for`` get a pending one. The writer
    fills in both when it builds the batch."""

    topic: str
    source: str
    payload_json: str
    correlation_id: str | None
    idempotency_key: str | None
    created_at: float
    claimed_by: Sequence[str] = ()
    queued_for: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class Registration:
    """A subscriber starting in this process: create its cursor, or catch up from it.

    Catching up also recovers deliveries left in flight by a dead process:
    back to pending (marked as recovered), or dead once ``max_attempts`` is used up.
    """

    subscriber_id: str
    pattern: str
    max_attempts: int
    declared: bool = False  # subscribed in another process: known, refreshed, never altered


@dataclass(slots=True)
class Outcome:
    """How one delivery ended. ``released``: not a failure (shutdown); the claim is undone."""

    event_id: int
    subscriber_id: str
    status: Literal["done", "retry", "dead", "released"]
    error: str | None = None
    next_at: float = 0.0


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """Claim up to ``limit`` due pending deliveries of a subscriber, oldest event first.

    A recovered delivery (its process died while handling it) is claimed only
    ``alone`` (nothing else of that subscriber in hand), so a crash can be
    blamed on it precisely.
    """

    subscriber_id: str
    limit: int
    alone: bool


@dataclass(frozen=True, slots=True)
class ClaimResult:
    events: list[Event]
    exhausted: bool  # no further due pending delivery remains
    blocked: bool  # stopped at a recovered delivery that must run alone
    solo: bool  # ``events`` is one recovered delivery: claim nothing more until it ends


@dataclass(slots=True)
class WriteBatch:
    """Everything one transaction applies, in this order: fan-out of events written
    by other processes to ``active`` subscribers, ``registrations``, ``events``,
    ``outcomes``, ``claims``. (The PostgreSQL journal creates every subscriber's
    deliveries when an event is published, so it has no use for ``active``.)"""

    now: float
    active: dict[str, str] = field(default_factory=dict)  # subscriber id -> pattern
    registrations: list[Registration] = field(default_factory=list)
    events: list[NewEvent] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    claims: list[ClaimRequest] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.registrations or self.events or self.outcomes or self.claims)


@dataclass(slots=True)
class BatchResult:
    event_ids: list[tuple[int, bool]]  # per NewEvent: (id, stored); stored=False: duplicate key
    claims: dict[str, ClaimResult]
    queued: set[str]  # subscribers that got new pending deliveries (fan-out or catch-up)
    next_retry_at: dict[str, float]  # subscriber -> earliest retry scheduled in this batch


@dataclass(frozen=True, slots=True)
class DeliveryInfo:
    subscriber_id: str
    status: DeliveryStatus
    attempt: int
    error: str | None


@dataclass(frozen=True, slots=True)
class EventRecord:
    """An event with its deliveries, for inspection (``main.py events``, ``/status``)."""

    id: int
    topic: str
    source: str
    payload: dict[str, object]
    correlation_id: str | None
    idempotency_key: str | None
    created_at: float
    deliveries: tuple[DeliveryInfo, ...]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    event_id: int
    subscriber_id: str
    topic: str
    source: str
    attempt: int
    error: str | None
    created_at: float
    failed_at: float


class Journal(Protocol):
    """Durable storage behind ``EventBus``; the inspection calls work without a bus."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    @property
    def is_open(self) -> bool: ...
    async def commit(self, batch: WriteBatch) -> BatchResult: ...
    async def purge(self, older_than: float, keep_subscribers: Collection[str] = ()) -> int: ...
    async def forget_subscribers(self, prefix: str, keep: Collection[str] = ()) -> list[str]: ...

    async def recent_events(
        self, limit: int = 20, topic: str | None = None
    ) -> list[EventRecord]: ...
    async def dead_letters(self, limit: int = 50) -> list[DeadLetter]: ...
    async def requeue(self, event_id: int, subscriber_id: str | None = None) -> int: ...
    async def counts(self) -> dict[str, int]: ...


@runtime_checkable
class WakeupSource(Protocol):
    """A journal that learns when other processes write (PostgreSQL ``LISTEN``).

    The bus gives it ``wake(topics)``, called with the topics another process
    just committed (``None``: anything may have changed). Journals without it
    (SQLite) are polled every ``events.poll_interval_s``.
    """

    def set_wakeup(self, wake: Callable[[Collection[str] | None], None]) -> None: ...
