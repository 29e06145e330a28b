"""A conversation's turns across processes (ADR 0036): one at a time, in message order,
and never held by a dead process. Two ``ConversationLocks`` stand for two processes."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

import core.events.pg_schema  # noqa: F401  (registers the journal's migrations)
from core.events.errors import DeliveryDeferred
from core.kernel.scale.turn_lock import ConversationLocks
from core.storage import apply_migrations, open_pool


def _locks(pool, dsn: str) -> ConversationLocks:
    local: dict[str, asyncio.Lock] = {}
    return ConversationLocks(lambda key: local.setdefault(key, asyncio.Lock()), pool, dsn)


async def _open_message(
    pool, event_id: int, user: str, status: str, *, next_at: float = 0.0, recovered=False
) -> None:
    """A ``user.message`` of ``cli:<user>`` with its router delivery in ``status``."""
    payload = json.dumps({"text": "hi", "user_id": user, "channel_id": "cli"})
    await pool.execute(
        "INSERT INTO journal_events (id, topic, source, payload, created_at)"
        " VALUES ($1, 'user.message', 'cli', $2, $3)",
        event_id,
        payload,
        time.time(),
    )
    await pool.execute(
        "INSERT INTO journal_deliveries"
        " (event_id, subscriber_id, status, next_at, recovered, updated_at)"
        " VALUES ($1, 'kernel.router', $2, $3, $4, $5)",
        event_id,
        status,
        next_at,
        recovered,
        time.time(),
    )


async def test_one_turn_per_conversation_across_processes(postgres_dsn):
    pool = await open_pool(postgres_dsn)
    first, second = _locks(pool, postgres_dsn), _locks(pool, postgres_dsn)
    try:
        async with first.hold("cli:alice"):
            waiting = asyncio.create_task(_enter(second, "cli:alice"))
            async with asyncio.timeout(10):  # another conversation is not held up
                async with second.hold("cli:bob"):
                    pass
            await asyncio.sleep(0.3)
            assert not waiting.done()  # alice's second turn waits for her first
        async with asyncio.timeout(10):
            await waiting
        # a process that dies holding a lock frees it with its session
        async with first.hold("cli:alice"):
            holders = await pool.fetch(
                "SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
                " WHERE l.locktype = 'advisory' AND d.datname = current_database()"
            )
            assert len(holders) == 1
            await pool.execute("SELECT pg_terminate_backend($1)", holders[0]["pid"])  # killed
            async with asyncio.timeout(10):
                await _enter(second, "cli:alice")
    finally:
        await first.aclose()
        await second.aclose()
        await pool.close()


async def test_a_later_message_waits_for_an_earlier_one_of_its_conversation(postgres_dsn):
    pool = await open_pool(postgres_dsn)
    await apply_migrations(pool, ["journal"])
    locks = _locks(pool, postgres_dsn)
    try:
        await _open_message(pool, 1, "alice", "inflight")  # running in another process
        await _open_message(pool, 2, "bob", "pending")
        await _open_message(pool, 3, "alice#reply:x1", "pending")  # alice, one request
        later = asyncio.create_task(_enter(locks, "cli:alice", (4, "cli", "alice")))
        async with asyncio.timeout(10):  # bob's message 2 is first in his conversation
            await _enter(locks, "cli:bob", (2, "cli", "bob"))
        # carol's earlier one waits for a retry: it does not hold her next message up
        await _open_message(pool, 5, "carol", "pending", next_at=time.time() + 60)
        async with asyncio.timeout(10):
            await _enter(locks, "cli:carol", (7, "cli", "carol"))
        # dave's was taken back from a dead process (claimed only alone): his next one
        # gives its delivery back rather than wait, or run before it (ADR 0039)
        await _open_message(pool, 8, "dave", "pending", recovered=True)
        with pytest.raises(DeliveryDeferred, match="message 9 on cli: an earlier one of dave"):
            await _enter(locks, "cli:dave", (9, "cli", "dave#reply:r1"))
        await asyncio.sleep(0.3)
        assert not later.done()
        await pool.execute("UPDATE journal_deliveries SET status = 'done' WHERE event_id = 1")
        await asyncio.sleep(0.3)
        assert not later.done()  # message 3 (same conversation, a reply tag) is still open
        await pool.execute("UPDATE journal_deliveries SET status = 'dead' WHERE event_id = 3")
        async with asyncio.timeout(10):
            await later
    finally:
        await locks.aclose()
        await pool.close()


async def _enter(locks: ConversationLocks, key: str, message=None) -> None:
    async with locks.hold(key, message):
        pass
