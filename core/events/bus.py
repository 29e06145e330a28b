"""EventBus: the public front of durable publish/subscribe (SPEC §3).

The work is done elsewhere: ``writer`` commits and hands over, ``dispatch``
runs handlers, the journal stores. This module validates input, owns the
tasks (one TaskGroup) and orders start and stop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.events.backend import journal_for
from core.events.dispatch import RetryPolicy, worker_loop
from core.events.errors import BusStateError
from core.events.journal import Journal, NewEvent, Outcome, Registration, WakeupSource
from core.events.payloads import encode_payload
from core.events.stats import BusStats
from core.events.subscriptions import EventHandler, Subscription
from core.events.system_payloads import check_system_payload
from core.events.topics import topic_matches, validate_pattern, validate_topic
from core.events.writer import GroupCommitWriter

if TYPE_CHECKING:
    from core.config import EventsSettings, StorageSettings

__all__ = ["EventBus"]

log = logging.getLogger(__name__)

_MAX_ROUTES = 4096  # distinct topics remembered; more (generated names) start over


class EventBus:
    """Durable, in-process publish/subscribe over a ``Journal``."""

    def __init__(
        self,
        journal: Journal,
        *,
        max_attempts: int = 5,
        retry_base_s: float = 0.5,
        retry_max_s: float = 60.0,
        poll_interval_s: float = 1.0,
        retention_days: float = 7.0,
        stop_timeout_s: float = 10.0,
        max_payload_bytes: int = 256 * 1024,
    ) -> None:
        _require(max_attempts >= 1, "max_attempts", max_attempts, "must be at least 1")
        _require(retry_base_s >= 0, "retry_base_s", retry_base_s, "must be >= 0")
        _require(retry_max_s >= 0, "retry_max_s", retry_max_s, "must be >= 0")
        _require(poll_interval_s > 0, "poll_interval_s", poll_interval_s, "must be > 0")
        _require(retention_days > 0, "retention_days", retention_days, "must be > 0")
        _require(stop_timeout_s >= 0, "stop_timeout_s", stop_timeout_s, "must be >= 0")
        _require(max_payload_bytes > 0, "max_payload_bytes", max_payload_bytes, "must be > 0")
        self.max_payload_bytes = max_payload_bytes
        self.journal = journal
        self._policy = RetryPolicy(max_attempts, retry_base_s, retry_max_s)
        self._poll_interval_s = poll_interval_s
        self._retention_s = retention_days * 86400.0
        self._stop_timeout_s = stop_timeout_s
        self._subs: dict[str, Subscription] = {}
        self._declared: set[str] = set()  # subscribed by other processes (``declare``)
        self._routes: dict[str, tuple[Subscription, ...]] = {}  # valid topic -> its subscribers
        self._writer = GroupCommitWriter(journal, self._subs, max_attempts)
        if isinstance(journal, WakeupSource):  # other processes' commits wake us at once
            journal.set_wakeup(self._writer.poke_topics)
        self.counters = BusStats()  # what happened since start, read by the metrics exporter
        self._direct_lock = asyncio.Lock()
        self._main: asyncio.Task[None] | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._state = "new"  # new -> running -> stopped
        self._failure = "its writer stopped"

    @classmethod
    def from_settings(
        cls, path: str | Path, settings: EventsSettings, storage: StorageSettings | None = None
    ) -> EventBus:
        """A bus configured from the ``events:`` settings section, on the journal
        ``storage.backend`` names (default: ``SQLiteJournal(path)``)."""
        return cls(
            journal_for(path, settings, storage),
            max_attempts=settings.max_attempts,
            retry_base_s=settings.retry_base_s,
            retry_max_s=settings.retry_max_s,
            poll_interval_s=settings.poll_interval_s,
            retention_days=settings.retention_days,
            stop_timeout_s=settings.stop_timeout_s,
            max_payload_bytes=settings.max_payload_bytes,
        )

    # ------------------------------------------------------------------ subscribe / publish

    def subscribe(
        self,
        topic: str,
        handler: EventHandler,
        subscriber_id: str,
        *,
        concurrency: int = 1,
        timeout: float | None = None,
    ) -> None:
        """Deliver events matching ``topic`` to ``handler`` as durable subscriber ``subscriber_id``.

        A subscriber id known to the journal also receives what was published
        while it was away; a new one receives what is published from now on.
        """
        validate_pattern(topic)
        if not isinstance(subscriber_id, str) or not subscriber_id.strip():
            raise ValueError(f"subscriber_id must be a non-empty string, got {subscriber_id!r}")
        _require(concurrency >= 1, "concurrency", concurrency, "must be at least 1")
        _require(timeout is None or timeout > 0, "timeout", timeout, "must be > 0 or None")
        if subscriber_id in self._subs or subscriber_id in self._declared:
            raise BusStateError(f"subscriber id {subscriber_id!r} is already subscribed")
        sub = Subscription(subscriber_id, topic, handler, concurrency, timeout)
        self._subs[subscriber_id] = sub
        self._routes.clear()
        self._writer.add_registration(sub)
        if self._tg is not None and self._state == "running":
            self._spawn_workers(self._tg, sub)

    def declare(self, topic: str, subscriber_id: str) -> None:
        """Make ``subscriber_id`` known to a journal shared by several processes
        without delivering anything to it here (ADR 0039).

        Another process subscribes it; until one first does, every event on
        ``topic`` published anywhere waits for it as a pending delivery instead
        of being published to nobody, and this process's retention purge keeps
        it. Declaring never changes the pattern or attempts a subscribing
        process registered.
        """
        validate_pattern(topic)
        if not isinstance(subscriber_id, str) or not subscriber_id.strip():
            raise ValueError(f"subscriber_id must be a non-empty string, got {subscriber_id!r}")
        if subscriber_id in self._subs or subscriber_id in self._declared:
            raise BusStateError(f"subscriber id {subscriber_id!r} is already subscribed")
        self._declared.add(subscriber_id)
        reg = Registration(subscriber_id, topic, self._policy.max_attempts, declared=True)
        self._writer.add_declaration(reg)

    def unsubscribe(self, subscriber_id: str) -> bool:
        """Stop delivering to ``subscriber_id`` in this process; False if it was not subscribed.

        The reverse of ``subscribe`` (for unwiring an extension): events queued
        for it are released, its workers stop after the handler in hand, and
        its journal cursor stays, so subscribing again catches up with what
        was published meanwhile. ``forget_subscribers`` removes the cursor too.
        """
        sub = self._subs.pop(subscriber_id, None)
        if sub is None:
            return False
        self._routes.clear()
        self._release_queued(sub)
        for _ in sub.workers:
            sub.queue.put(None)
        return True

    async def forget_subscribers(self, prefix: str) -> list[str]:
        """Delete the journal rows (cursor, unfinished deliveries) of subscriber ids
        starting with ``prefix`` that are not subscribed on this bus now.

        The kernel calls it with ``<extension id>/`` once an extension is
        started, so subscriptions it no longer makes do not pile up.
        """
        keep = [sid for sid in self._subs if sid.startswith(prefix)]
        return await self.journal.forget_subscribers(prefix, keep)

    async def publish(
        self,
        topic: str,
        source: str,
        payload: dict[str, Any],
        *,
        correlation_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> int:
        """Journal an event and return its id once committed (durable).

        With an ``idempotency_key`` seen before, returns the first event's id
        and stores nothing. Raises ``ValueError`` for a bad topic or a payload
        that is not a JSON object, ``SystemPayloadError`` (a ``ValueError``) for a
        system-topic payload that does not fit its model (SPEC §3),
        ``PayloadTooLargeError`` (a ``ValueError``) for one larger than
        ``max_payload_bytes``: the cap holds for every publisher.
        """
        subscribers = self._routes.get(topic)
        if subscribers is None:
            subscribers = self._route(topic)
        check_system_payload(topic, payload)
        payload_json = encode_payload(topic, payload, self.max_payload_bytes)
        event = NewEvent(topic, source, payload_json, correlation_id, idempotency_key, time.time())
        if self._writer.running:
            event_id = await self._writer.add_publish(event, subscribers)
        elif self._state == "running":
            # never journal-only while running: that would store events nobody delivers
            raise BusStateError(f"EventBus.publish({topic!r}): the bus is down ({self._failure})")
        else:
            event_id = await self._publish_direct(event, subscribers)
        self.counters.published += 1
        return event_id

    def _route(self, topic: str) -> tuple[Subscription, ...]:
        """Validate ``topic`` and remember which subscribers it goes to (until a subscribe)."""
        validate_topic(topic)
        if len(self._routes) >= _MAX_ROUTES:
            self._routes.clear()
        subscribers = tuple(s for s in self._subs.values() if topic_matches(s.pattern, topic))
        self._routes[topic] = subscribers
        return subscribers

    async def _publish_direct(self, event: NewEvent, subscribers: tuple[Subscription, ...]) -> int:
        """Before start() and after stop(): commit at once, nothing is dispatched."""
        async with self._direct_lock:
            opened_here = not self.journal.is_open
            await self.journal.open()
            try:
                future = self._writer.add_publish(event, subscribers)
                await self._writer.flush()
                return await future
            finally:
                if opened_here and self._state == "stopped":
                    await self.journal.close()

    async def stats(self) -> dict[str, int]:
        """Deliveries by status and the number of stored events (``Journal.counts``)."""
        return await self.journal.counts()

    def queue_depth(self) -> int:
        """Deliveries claimed from the journal and waiting in memory for a handler."""
        return sum(len(sub.queue) for sub in self._subs.values())

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the journal, register subscribers, and start dispatching."""
        if self._state != "new":
            raise BusStateError(f"EventBus.start(): bus is {self._state}, start it only once")
        async with self._direct_lock:
            await self.journal.open()
            self._state = "running"
            self._writer.dispatching = True
            for sub in self._subs.values():
                sub.backlog = True
            await self._writer.flush()
        started = asyncio.Event()
        self._writer.running = True  # publishes queue for the writer from now on
        self._main = asyncio.create_task(self._run(started), name="event-bus")
        await started.wait()

    async def watch(self) -> None:
        """Wait while the bus runs; raise ``BusStateError`` if its tasks die.

        The kernel runs this in its TaskGroup, so a dead writer (or any bus
        task) stops the kernel loudly instead of leaving it serving without
        delivery. Returns quietly when the bus is stopped on purpose.
        """
        if self._main is None:
            raise BusStateError("EventBus.watch(): the bus is not running")
        main = self._main
        try:
            await asyncio.shield(main)
        except asyncio.CancelledError:
            if not main.done():
                raise  # our watcher was cancelled, the bus still runs
        except Exception as exc:
            raise BusStateError(f"the event bus failed: {self._failure}") from exc
        if self._state == "running":
            raise BusStateError("the event bus stopped by itself while running")

    async def _run(self, started: asyncio.Event) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                tg.create_task(self._writer.run(), name="event-bus-writer")
                self._loops = [
                    tg.create_task(self._poll_loop(), name="event-bus-poll"),
                    tg.create_task(self._purge_loop(), name="event-bus-purge"),
                ]
                for sub in self._subs.values():
                    self._spawn_workers(tg, sub)
                started.set()
        except Exception as exc:
            causes = exc.exceptions if isinstance(exc, BaseExceptionGroup) else (exc,)
            self._failure = "; ".join(f"{type(e).__name__}: {e}" for e in causes)
            log.critical("event bus task died, nothing is delivered: %s", self._failure)
            raise
        finally:
            self._tg = None
            started.set()

    def _spawn_workers(self, tg: asyncio.TaskGroup, sub: Subscription) -> None:
        for n in range(sub.concurrency):
            task = tg.create_task(
                worker_loop(sub, self._policy, self._report, self.counters),
                name=f"event-bus-{sub.id}-{n}",
            )
            sub.workers.append(task)

    def _report(self, sub: Subscription, outcome: Outcome) -> None:
        self.counters.count_outcome(outcome.status)
        if sub.solo and not sub.running and not sub.queue:
            sub.solo = False
        self._writer.add_outcome(outcome)

    async def _poll_loop(self) -> None:
        """Pick up what other processes wrote (events, requeued deliveries, due retries)."""
        while True:
            await asyncio.sleep(self._poll_interval_s)
            self._writer.poke()

    async def _purge_loop(self) -> None:
        interval = min(max(self._retention_s / 10, 1.0), 3600.0)
        while True:
            try:
                keep = [*self._subs, *self._declared]
                purged = await self.journal.purge(time.time() - self._retention_s, keep)
                if purged:
                    log.info("event journal: purged %d finished events", purged)
            except Exception:
                log.exception("event journal purge failed")
            await asyncio.sleep(interval)

    async def stop(self) -> None:
        """Stop taking work, let handlers finish (``stop_timeout_s``), release the rest,
        flush acks and close the journal. Released deliveries are redelivered next start."""
        if self._state != "running":
            self._state = "stopped"
            await self.journal.close()
            return
        self._state = "stopped"
        self._writer.dispatching = False
        workers = [t for sub in self._subs.values() for t in sub.workers]
        for sub in self._subs.values():
            self._release_queued(sub)
            for _ in sub.workers:
                sub.queue.put(None)
        if workers:
            _, late = await asyncio.wait(workers, timeout=self._stop_timeout_s)
            for task in late:
                task.cancel()
            if late:
                log.warning("event bus stop: cancelled %d handlers still running", len(late))
                await asyncio.wait(late)
        for sub in self._subs.values():
            for event in sub.running.values():
                self._writer.add_outcome(Outcome(event.id, sub.id, "released"))
            sub.running.clear()
            sub.workers.clear()
        for task in self._loops:
            task.cancel()
        self._writer.close()
        if self._main is not None:
            try:
                await self._main
            except asyncio.CancelledError:
                if not self._main.done():
                    raise
            except Exception:  # already logged by _run and raised by watch()
                log.error("event bus stopped after a failure: %s", self._failure)
        self._main = None
        await self.journal.close()

    def _release_queued(self, sub: Subscription) -> None:
        for event in sub.queue.take_all():
            if event is not None:
                self._writer.add_outcome(Outcome(event.id, sub.id, "released"))


def _require(ok: bool, name: str, value: object, rule: str) -> None:
    if not ok:
        raise ValueError(f"EventBus {name}={value!r}: {rule}")
