"""PostgreSQL journal (asyncpg): several kernel processes share one event journal.

Same protocol and semantics as ``SQLiteJournal`` (ADR 0034): group commit in
one transaction, durable when ``commit`` returns; a known subscriber gets
what was published while it was away; retries, dead letters, idempotency
keys, retention. What one database shared
by several processes adds:

- claims take rows ``FOR UPDATE SKIP LOCKED``: processes subscribed under the
  same id share its work, and no delivery is handed to two of them;
- a committed batch that stored events sends ``NOTIFY``; a dedicated
  ``LISTEN`` connection per process wakes the local bus for the topics named,
  so an idle process reacts within milliseconds instead of at its next poll;
- each process beats a heartbeat (``pg_liveness``); in-flight deliveries are
  taken back only from processes that are dead, never from a live one busy
  with a long agent turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from core.events.errors import JournalError
from core.events.journal import BatchResult, DeadLetter, DeliveryInfo, EventRecord, WriteBatch
from core.events.pg_batch import apply_batch, notify_payload
from core.events.pg_liveness import leave, liveness_round
from core.events.pg_schema import COMPONENT, NOTIFY_CHANNEL
from core.storage import (
    StorageError,
    apply_migrations,
    connect as connect_postgres,
    pool_for,
    redact_dsn,
    release_pool,
)

__all__ = ["PostgresJournal", "Wakeup"]

log = logging.getLogger(__name__)

Wakeup = Callable[[Collection[str] | None], None]  # topics written elsewhere (None: any)

_STATUSES = ("pending", "inflight", "done", "dead")
_TRANSIENT = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)
_COMMIT_TRIES = 5


class PostgresJournal:
    """Event journal in a PostgreSQL database. ``lease_s``: how long a process that
    stopped beating keeps its in-flight deliveries before another takes them back."""

    def __init__(
        self, dsn: str, *, lease_s: float = 15.0, pool_min_size: int = 1, pool_max_size: int = 10
    ) -> None:
        if lease_s <= 0:
            raise ValueError(f"PostgresJournal lease_s must be > 0, got {lease_s!r}")
        self.dsn = dsn
        self.lease_s = lease_s
        self.process_id = f"{uuid.uuid4().hex[:12]}"
        self._pool_sizes = (pool_min_size, pool_max_size)
        self._pool: Any = None
        self._listener: Any = None
        self._keepalive: asyncio.Task[None] | None = None
        self._wake: Wakeup | None = None

    def __repr__(self) -> str:
        return f"PostgresJournal({redact_dsn(self.dsn)!r})"

    def set_wakeup(self, wake: Wakeup) -> None:
        """Call ``wake(topics)`` when another process commits events (or frees deliveries)."""
        self._wake = wake

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    async def open(self) -> None:
        """Connect, migrate the schema, join the live processes. Opening twice is a no-op."""
        if self._pool is not None:
            return
        pool = await self._acquire_pool()
        try:
            async with pool.acquire() as conn:
                recovered = await liveness_round(conn, self.process_id, self.lease_s)
        except BaseException:
            await release_pool(pool)
            raise
        if recovered:
            log.warning("event journal: %d deliveries of dead processes taken back", recovered)
        self._pool = pool
        await self._listen()
        self._keepalive = asyncio.create_task(self._beat(), name="event-journal-heartbeat")

    async def close(self) -> None:
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        if self._keepalive is not None:
            self._keepalive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keepalive
            self._keepalive = None
        await self._unlisten()
        try:
            async with pool.acquire() as conn:
                await leave(conn, self.process_id)
        except (OSError, asyncpg.PostgresError) as exc:
            log.warning("event journal: could not leave cleanly (the lease will expire): %s", exc)
        await release_pool(pool)

    async def _acquire_pool(self) -> Any:
        minimum, maximum = self._pool_sizes
        try:
            pool = await pool_for(self.dsn, min_size=minimum, max_size=maximum)
        except StorageError as exc:
            raise JournalError("event journal", str(exc)) from exc
        try:
            await apply_migrations(pool, [COMPONENT])
        except StorageError as exc:
            await release_pool(pool)
            raise JournalError("event journal", str(exc)) from exc
        except BaseException:
            await release_pool(pool)
            raise
        return pool

    async def _listen(self) -> None:
        if self._wake is None:
            return
        try:
            self._listener = await connect_postgres(self.dsn)
            await self._listener.add_listener(NOTIFY_CHANNEL, self._on_notify)
        except (StorageError, OSError, asyncpg.PostgresError) as exc:
            log.warning("event journal: LISTEN failed, polling only until it works: %s", exc)
            await self._unlisten()

    async def _unlisten(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None and not listener.is_closed():
            with contextlib.suppress(OSError, asyncpg.PostgresError):
                await listener.close(timeout=2)

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            message = json.loads(payload)
        except ValueError:
            message = {"from": None, "topics": None}
        if message.get("from") == self.process_id or self._wake is None:
            return
        topics = message.get("topics")
        self._wake(None if topics is None else [str(t) for t in topics])

    async def _beat(self) -> None:
        """Heartbeat, reap dead processes, keep the LISTEN connection up."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            pool = self._pool
            if pool is None:
                return
            try:
                async with pool.acquire() as conn:
                    recovered = await liveness_round(conn, self.process_id, self.lease_s)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("event journal heartbeat failed: %s", exc)
                continue
            if recovered:
                log.warning("event journal: %d deliveries of dead processes taken back", recovered)
            lost = self._wake is not None and (self._listener is None or self._listener.is_closed())
            if lost:
                await self._unlisten()
                await self._listen()
            if (recovered or lost) and self._wake is not None:
                self._wake(None)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """A connection of this journal's pool, or of a temporary one (inspection calls)."""
        pool = self._pool
        temporary = pool is None
        if temporary:
            pool = await self._acquire_pool()
        try:
            async with pool.acquire() as conn:
                yield conn
        finally:
            if temporary:
                await release_pool(pool)

    # ------------------------------------------------------------------ bus side

    async def commit(self, batch: WriteBatch) -> BatchResult:
        """Apply one group commit; see ``WriteBatch`` for the order of operations.

        A deadlock or serialization failure rolled everything back, so the
        whole batch is simply tried again.
        """
        if self._pool is None:
            raise JournalError(redact_dsn(self.dsn), "journal is not open")
        for attempt in range(1, _COMMIT_TRIES + 1):
            try:
                async with self._pool.acquire() as conn:
                    return await apply_batch(conn, batch, self.process_id)
            except _TRANSIENT as exc:
                if attempt == _COMMIT_TRIES:
                    raise
                log.info("event journal commit retried (%s)", type(exc).__name__)
        raise AssertionError("unreachable")

    async def purge(self, older_than: float, keep_subscribers: Collection[str] = ()) -> int:
        """Delete finished events created before ``older_than`` (Unix time); returns how many."""
        total = 0
        async with self._connection() as conn:
            while True:
                n = await _purge_chunk(conn, older_than, time.time(), sorted(keep_subscribers))
                total += n
                if n == 0:
                    return total

    async def forget_subscribers(self, prefix: str, keep: Collection[str] = ()) -> list[str]:
        """Delete subscribers whose id starts with ``prefix`` and is not in ``keep``,
        with their unfinished deliveries; returns the ids forgotten (sorted)."""
        async with self._connection() as conn, conn.transaction():
            rows = await conn.fetch(
                "SELECT id FROM journal_subscribers WHERE starts_with(id, $1) ORDER BY id", prefix
            )
            ids = [str(r["id"]) for r in rows if r["id"] not in keep]
            await conn.execute(
                "DELETE FROM journal_deliveries WHERE subscriber_id = ANY($1)"
                " AND status IN ('pending', 'inflight')",
                ids,
            )
            await conn.execute("DELETE FROM journal_subscribers WHERE id = ANY($1)", ids)
        return ids

    # ------------------------------------------------------------------ inspection

    async def recent_events(self, limit: int = 20, topic: str | None = None) -> list[EventRecord]:
        """The newest ``limit`` events (optionally one topic), newest first, with deliveries."""
        async with self._connection() as conn:
            rows = await conn.fetch(
                "SELECT id, topic, source, payload, correlation_id, idempotency_key, created_at"
                " FROM journal_events WHERE $1::text IS NULL OR topic = $1"
                " ORDER BY id DESC LIMIT $2",
                topic,
                limit,
            )
            ids = [int(r["id"]) for r in rows]
            deliveries = await conn.fetch(
                "SELECT event_id, subscriber_id, status, attempt, error FROM journal_deliveries"
                " WHERE event_id = ANY($1) ORDER BY subscriber_id",
                ids,
            )
        by_event: dict[int, list[DeliveryInfo]] = {}
        for d in deliveries:
            info = DeliveryInfo(d["subscriber_id"], d["status"], int(d["attempt"]), d["error"])
            by_event.setdefault(int(d["event_id"]), []).append(info)
        return [
            EventRecord(
                id=int(r["id"]),
                topic=r["topic"],
                source=r["source"],
                payload=json.loads(r["payload"]),
                correlation_id=r["correlation_id"],
                idempotency_key=r["idempotency_key"],
                created_at=float(r["created_at"]),
                deliveries=tuple(by_event.get(int(r["id"]), ())),
            )
            for r in rows
        ]

    async def dead_letters(self, limit: int = 50) -> list[DeadLetter]:
        """Dead deliveries, most recently failed first, with the error that killed them."""
        async with self._connection() as conn:
            rows = await conn.fetch(
                "SELECT d.event_id, d.subscriber_id, e.topic, e.source, d.attempt, d.error,"
                " e.created_at, d.updated_at FROM journal_deliveries d"
                " JOIN journal_events e ON e.id = d.event_id"
                " WHERE d.status = 'dead' ORDER BY d.updated_at DESC LIMIT $1",
                limit,
            )
        return [
            DeadLetter(
                event_id=int(r["event_id"]),
                subscriber_id=r["subscriber_id"],
                topic=r["topic"],
                source=r["source"],
                attempt=int(r["attempt"]),
                error=r["error"],
                created_at=float(r["created_at"]),
                failed_at=float(r["updated_at"]),
            )
            for r in rows
        ]

    async def requeue(self, event_id: int, subscriber_id: str | None = None) -> int:
        """Put dead deliveries of ``event_id`` back to pending (attempts reset); returns how
        many. Running processes are notified and pick them up at once."""
        async with self._connection() as conn, conn.transaction():
            status = await conn.execute(
                "UPDATE journal_deliveries SET status = 'pending', attempt = 0, next_at = 0,"
                " recovered = false, updated_at = $1 WHERE event_id = $2 AND status = 'dead'"
                " AND ($3::text IS NULL OR subscriber_id = $3)",
                time.time(),
                event_id,
                subscriber_id,
            )
            count = int(status.split()[-1])
            if count:
                payload = notify_payload(self.process_id, None)
                await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, payload)
        return count

    async def counts(self) -> dict[str, int]:
        """Deliveries by status (``pending``, ``inflight``, ``done``, ``dead``) and ``events``."""
        async with self._connection() as conn:
            rows = await conn.fetch(
                "SELECT status, count(*) AS n FROM journal_deliveries GROUP BY status"
            )
            events = await conn.fetchval("SELECT count(*) FROM journal_events")
        counts = dict.fromkeys(_STATUSES, 0)
        counts.update({str(r["status"]): int(r["n"]) for r in rows})
        counts["events"] = int(events)
        return counts


async def _purge_chunk(
    conn: Any, older_than: float, now: float, keep: list[str], chunk: int = 2000
) -> int:
    """Delete up to ``chunk`` finished events created before ``older_than``. Subscribers
    not seen since then (by any process: each keeps those it subscribes or declares) are
    forgotten first: nothing new is published to them. What was published to them before
    waits for them (a node back from a long outage, or its successor, finds it pending)
    until it is itself older than ``older_than`` (ADR 0039)."""
    async with conn.transaction():
        await conn.execute(
            "UPDATE journal_subscribers SET last_seen = $1 WHERE id = ANY($2)", now, keep
        )
        await conn.execute("DELETE FROM journal_subscribers WHERE last_seen < $1", older_than)
        await conn.execute(
            "DELETE FROM journal_deliveries d USING journal_events e"
            " WHERE e.id = d.event_id AND d.status = 'pending' AND e.created_at < $1"
            " AND NOT EXISTS (SELECT 1 FROM journal_subscribers s WHERE s.id = d.subscriber_id)",
            older_than,
        )
        rows = await conn.fetch(
            "SELECT id FROM journal_events e WHERE created_at < $1 AND NOT EXISTS"
            " (SELECT 1 FROM journal_deliveries d WHERE d.event_id = e.id"
            " AND d.status IN ('pending', 'inflight')) ORDER BY id LIMIT $2",
            older_than,
            chunk,
        )
        ids = [int(r["id"]) for r in rows]
        if ids:
            await conn.execute("DELETE FROM journal_deliveries WHERE event_id = ANY($1)", ids)
            await conn.execute("DELETE FROM journal_events WHERE id = ANY($1)", ids)
    return len(ids)
