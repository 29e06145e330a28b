"""One turn per conversation at a time across kernel processes (ADR 0036).

Within a process the conversation's ``asyncio.Lock`` orders turns in arrival
order. With several processes on one PostgreSQL the turn also holds a
session advisory lock keyed on the conversation, on a pooled connection, for
as long as it runs; PostgreSQL frees it when the holder's session ends, so a
process killed mid-turn blocks nobody. The in-process lock is taken first,
so a process holds at most one connection per conversation.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

__all__ = ["ConversationLocks", "advisory_key"]

_NAMESPACE = b"hearth.turn:"


def advisory_key(conversation: str) -> int:
    """A signed 64-bit advisory lock key for ``conversation`` (BLAKE2b of its key)."""
    digest = hashlib.blake2b(_NAMESPACE + conversation.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class ConversationLocks:
    """``hold(key)``: the process's lock for the conversation, then the database's."""

    def __init__(self, local: Callable[[str], asyncio.Lock], pool: Any) -> None:
        self._local = local
        self._pool = pool  # an asyncpg.Pool

    def hold(self, conversation: str) -> AbstractAsyncContextManager[object]:
        return self._held(conversation)

    @asynccontextmanager
    async def _held(self, conversation: str) -> AsyncIterator[object]:
        key = advisory_key(conversation)
        async with self._local(conversation), self._pool.acquire() as conn:
            await conn.execute("SELECT pg_advisory_lock($1)", key)
            try:
                yield conn
            finally:
                # a broken connection is reset or closed by the pool, freeing the lock
                await asyncio.shield(conn.execute("SELECT pg_advisory_unlock($1)", key))
