"""One turn per conversation at a time across kernel processes (ADR 0036).

Within a process the conversation's ``asyncio.Lock`` orders turns in arrival
order. With several processes on one PostgreSQL the turn also holds a
session advisory lock keyed on the conversation, on a pooled connection, for
as long as it runs; PostgreSQL frees it when the holder's session ends, so a
process killed mid-turn blocks nobody. The in-process lock is taken first,
so a process holds at most one connection per conversation.

Order: claims are oldest first, but two processes can claim two messages of
one conversation at once. Before it takes the locks, a turn therefore waits
while an earlier ``user.message`` of its conversation is still pending or in
flight for the router (``ORDER_WAIT_S`` at most, then it runs and says so);
it holds no lock while it waits, so the earlier one can never wait for it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from core.extensions.addresses import REPLY_TAG_MARK, split_reply_address

__all__ = ["ORDER_WAIT_S", "ConversationLocks", "advisory_key"]

log = logging.getLogger("core.kernel.turn_lock")

_NAMESPACE = b"hearth.turn:"
ORDER_WAIT_S = 300.0  # longest wait for an earlier message of the conversation
ORDER_POLL_S = 0.05
ROUTER_SUBSCRIBER = "kernel.router"

# earlier user.message events of one conversation (channel, address or address#reply:tag)
# that the router has not finished: pending (maybe waiting for a retry) or in flight
_EARLIER_OPEN = """
SELECT count(*) FROM journal_deliveries d JOIN journal_events e ON e.id = d.event_id
WHERE d.subscriber_id = $1 AND d.event_id < $2 AND d.status IN ('pending', 'inflight')
  AND e.topic = 'user.message' AND e.payload::jsonb ->> 'channel_id' = $3
  AND (e.payload::jsonb ->> 'user_id' = $4 OR starts_with(e.payload::jsonb ->> 'user_id', $5))
"""


def advisory_key(conversation: str) -> int:
    """A signed 64-bit advisory lock key for ``conversation`` (BLAKE2b of its key)."""
    digest = hashlib.blake2b(_NAMESPACE + conversation.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class ConversationLocks:
    """``hold(key)``: the process's lock for the conversation, then the database's."""

    def __init__(self, local: Callable[[str], asyncio.Lock], pool: Any) -> None:
        self._local = local
        self._pool = pool  # an asyncpg.Pool

    def hold(
        self, conversation: str, message: tuple[int, str, str] | None = None
    ) -> AbstractAsyncContextManager[object]:
        """The locks of ``conversation``; for a ``message`` (event id, channel id, user
        id), first its turn: no earlier message of the conversation still open."""
        return self._held(conversation, message)

    @asynccontextmanager
    async def _held(
        self, conversation: str, message: tuple[int, str, str] | None
    ) -> AsyncIterator[object]:
        if message is not None:
            await self._wait_turn(*message)
        key = advisory_key(conversation)
        async with self._local(conversation), self._pool.acquire() as conn:
            await conn.execute("SELECT pg_advisory_lock($1)", key)
            try:
                yield conn
            finally:
                # a broken connection is reset or closed by the pool, freeing the lock
                await asyncio.shield(conn.execute("SELECT pg_advisory_unlock($1)", key))

    async def _wait_turn(self, event_id: int, channel_id: str, user_id: str) -> None:
        address, _ = split_reply_address(user_id)
        args = (ROUTER_SUBSCRIBER, event_id, channel_id, address, address + REPLY_TAG_MARK)
        deadline = time.monotonic() + ORDER_WAIT_S
        while await self._pool.fetchval(_EARLIER_OPEN, *args):
            if time.monotonic() > deadline:
                log.warning(
                    "message %d on %s: an earlier one of %s is still open after %g s; "
                    "answering it now",
                    event_id,
                    channel_id,
                    address,
                    ORDER_WAIT_S,
                )
                return
            await asyncio.sleep(ORDER_POLL_S)
