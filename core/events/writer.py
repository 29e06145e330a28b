"""The single writer: group commit of everything queued, then in-memory hand-off.

Publishers, workers (acks) and subscribers (claims) only queue work and wake
the writer. Each round it turns the queue into one ``WriteBatch``, commits it
in one journal transaction, resolves the publishers' futures, and puts the
claimed deliveries straight into the subscribers' queues — local events are
never re-read from the database.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from core.events.errors import BusStateError
from core.events.journal import ClaimRequest, Journal, NewEvent, Outcome, Registration, WriteBatch
from core.events.models import Event
from core.events.payloads import decode_payload
from core.events.subscriptions import Subscription
from core.events.topics import topic_matches

__all__ = ["GroupCommitWriter"]

log = logging.getLogger(__name__)

_FAILURE_BACKOFF_S = 0.5


@dataclass(slots=True)
class _Publish:
    event: NewEvent
    subscribers: tuple[Subscription, ...]
    future: asyncio.Future[int]
    claimed: Sequence[Subscription] = ()  # fast path: in flight at once


@dataclass(slots=True)
class _Round:
    """What one batch promised, to settle once the commit returns."""

    publishes: list[_Publish]
    registrations: list[Subscription]
    declarations: list[Registration]
    claims: list[tuple[Subscription, int]]
    outcomes: list[Outcome]


class GroupCommitWriter:
    """Owns every write to the journal while the bus runs (and for direct publishes)."""

    def __init__(
        self, journal: Journal, subscriptions: dict[str, Subscription], max_attempts: int
    ) -> None:
        self._journal = journal
        self._subs = subscriptions
        self._max_attempts = max_attempts
        self._publishes: list[_Publish] = []
        self._outcomes: list[Outcome] = []
        self._registrations: list[Subscription] = []
        self._declarations: list[Registration] = []  # subscribed in other processes
        self._retries: list[tuple[float, str]] = []  # heap of (due time, subscriber id)
        self._wake = asyncio.Event()
        self.dispatching = False  # claim and hand over deliveries (False: only store)
        self.running = False  # the run() loop takes publishes
        self._closing = False
        self._inflight: list[_Publish] = []  # the round being committed

    # ------------------------------------------------------------------ queueing

    def add_publish(
        self, event: NewEvent, subscribers: tuple[Subscription, ...]
    ) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._publishes.append(_Publish(event, subscribers, future))
        self._wake.set()
        return future

    def add_outcome(self, outcome: Outcome) -> None:
        self._outcomes.append(outcome)
        if outcome.status == "released" and outcome.subscriber_id in self._subs:
            self._subs[outcome.subscriber_id].backlog = True  # claimed again, oldest first
        self._wake.set()

    def add_registration(self, sub: Subscription) -> None:
        self._registrations.append(sub)
        self._wake.set()

    def add_declaration(self, reg: Registration) -> None:
        self._declarations.append(reg)
        self._wake.set()

    def poke(self) -> None:
        """Re-check the journal: other processes' events, requeued and due deliveries."""
        for sub in self._subs.values():
            sub.backlog = True
        self._wake.set()

    def poke_topics(self, topics: Collection[str] | None) -> None:
        """Another process committed events on ``topics`` (``None``: look everywhere):
        the subscribers they may concern fetch from the journal at once."""
        if topics is None:
            self.poke()
            return
        for sub in self._subs.values():
            if any(topic_matches(sub.pattern, topic) for topic in topics):
                sub.backlog = True
                self._wake.set()

    def close(self) -> None:
        """Finish what is queued, then let ``run()`` return."""
        self._closing = True
        self._wake.set()

    # ------------------------------------------------------------------ loop

    async def run(self) -> None:
        self.running = True
        try:
            while True:
                await self._wait_for_work()
                if self._closing and not self._has_writes():
                    return
                if not await self.flush():
                    await asyncio.sleep(_FAILURE_BACKOFF_S)
        except BaseException as exc:
            self._abandon(exc)
            raise
        finally:
            self.running = False

    def _abandon(self, exc: BaseException) -> None:
        """The loop died: publishers waiting on it get an error, never a hang."""
        pending, self._publishes = [*self._inflight, *self._publishes], []
        for pub in pending:
            if not pub.future.done():
                error = BusStateError(f"the event bus writer stopped: {type(exc).__name__}: {exc}")
                pub.future.set_exception(error)

    def _has_writes(self) -> bool:
        return bool(self._publishes or self._outcomes or self._registrations or self._declarations)

    def _has_batch(self) -> bool:
        if self._has_writes():
            return True
        return self.dispatching and any(s.wants_claim() for s in self._subs.values())

    async def _wait_for_work(self) -> None:
        while True:
            self._fire_due_retries()
            if self._closing or self._has_batch():
                return
            self._wake.clear()
            delay = self._retries[0][0] - time.time() if self._retries else None
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _fire_due_retries(self) -> None:
        now = time.time()
        while self._retries and self._retries[0][0] <= now:
            _, sid = heapq.heappop(self._retries)
            sub = self._subs.get(sid)
            if sub is not None:
                sub.backlog = True

    # ------------------------------------------------------------------ one round

    async def flush(self) -> bool:
        """Commit one batch of everything queued; False if the journal failed."""
        batch, rnd = self._build()
        self._inflight = rnd.publishes
        try:
            result = await self._journal.commit(batch)
        except Exception as exc:
            log.exception("event journal commit failed (%d publishes)", len(rnd.publishes))
            self._undo(rnd, exc)
            return False
        for sub in rnd.registrations:
            sub.registered = True
        for pub, (event_id, stored) in zip(rnd.publishes, result.event_ids, strict=True):
            if pub.claimed:
                ev = pub.event
                for sub in pub.claimed:
                    sub.reserved -= 1
                    if stored:  # else a duplicate idempotency key: nothing was claimed
                        # each subscriber's own copy, decoded from the journaled JSON
                        payload = decode_payload(ev.payload_json)
                        event = Event(
                            event_id, ev.topic, ev.source, payload, ev.correlation_id, ev.created_at
                        )
                        self._hand_over(sub, event)
            if not pub.future.done():
                pub.future.set_result(event_id)
        for sub, limit in rnd.claims:
            claim = result.claims[sub.id]
            sub.reserved -= limit
            for event in claim.events:
                self._hand_over(sub, event)
            sub.backlog = not claim.exhausted
            sub.blocked = claim.blocked
            sub.solo = sub.solo or claim.solo
        for sid in result.queued:
            if sid in self._subs:
                self._subs[sid].backlog = True
        for sid, due in result.next_retry_at.items():
            heapq.heappush(self._retries, (due, sid))
        return True

    def _build(self) -> tuple[WriteBatch, _Round]:
        batch = WriteBatch(now=time.time())
        batch.active = {s.id: s.pattern for s in self._subs.values() if s.registered}
        rnd = _Round(self._publishes, self._registrations, self._declarations, [], self._outcomes)
        self._publishes, self._registrations, self._outcomes = [], [], []
        self._declarations = []
        batch.registrations = [
            Registration(s.id, s.pattern, self._max_attempts) for s in rnd.registrations
        ] + rnd.declarations
        dispatching = self.dispatching
        room = {sub: sub.room for sub in self._subs.values()} if dispatching else {}
        for pub in rnd.publishes:
            claimed: list[Subscription] = []
            queued_ids: list[str] = []
            for sub in pub.subscribers:
                if dispatching and not sub.backlog and room[sub] > 0:
                    room[sub] -= 1
                    sub.reserved += 1
                    claimed.append(sub)
                else:  # behind pending deliveries, or no room: queue it in order
                    sub.backlog = True
                    queued_ids.append(sub.id)
            if claimed:
                pub.claimed = claimed
                pub.event.claimed_by = [sub.id for sub in claimed]
            if queued_ids:
                pub.event.queued_for = queued_ids
        batch.events = [pub.event for pub in rnd.publishes]
        batch.outcomes = rnd.outcomes
        if dispatching:
            for sub in self._subs.values():
                if sub.wants_claim():
                    limit = sub.room
                    alone = sub.in_hand == 0
                    sub.reserved += limit
                    rnd.claims.append((sub, limit))
                    batch.claims.append(ClaimRequest(sub.id, limit, alone))
        return batch, rnd

    def _undo(self, rnd: _Round, exc: Exception) -> None:
        for pub in rnd.publishes:
            for sub in pub.claimed:
                sub.reserved -= 1
            pub.claimed = []
            if not pub.future.done():
                pub.future.set_exception(exc)
        for sub, limit in rnd.claims:
            sub.reserved -= limit
        # Acks and registrations are retried with the next batch; publishers saw the error.
        self._outcomes[:0] = rnd.outcomes
        self._registrations[:0] = rnd.registrations
        self._declarations[:0] = rnd.declarations

    def _hand_over(self, sub: Subscription, event: Event) -> None:
        if self.dispatching and self._subs.get(sub.id) is sub:
            sub.queue.put(event)
        else:  # stopping or unsubscribed: undo the claim so it is delivered later
            self._outcomes.append(Outcome(event.id, sub.id, "released"))
            self._wake.set()
