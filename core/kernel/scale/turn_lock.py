"""One turn per conversation at a time across kernel processes (ADR 0036).

Within a process the conversation's ``asyncio.Lock`` orders turns in arrival
order. With several processes on one PostgreSQL the turn also holds a
session advisory lock keyed on the conversation for as long as it runs. All
of a process's conversation locks live on *one* dedicated connection (a
session may hold many advisory locks), taken with ``pg_try_advisory_lock``
and polled while another process holds it: a turn never ties up a pooled
connection, so busy turns cannot starve the journal and the sessions of
connections. PostgreSQL frees the locks when that session ends, so a process
killed mid-turn blocks nobody.

Order: claims are oldest first, but two processes can claim two messages of
one conversation at once. Before it takes the locks, a turn therefore waits
while an earlier ``user.message`` of its conversation is in flight for the
router or due to be claimed (``ORDER_WAIT_S`` at most, then it runs and says
so); it holds no lock while it waits, so the earlier one can never wait for it.
An earlier message taken back from a dead process is claimed only by a
process with nothing else in hand, so waiting for it could stall every
process holding a later one: the later turn gives its own delivery back
instead (``DeliveryDeferred``, ADR 0039) and is claimed again after it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import asyncpg
from asyncpg.exceptions import InternalClientError

from core.events.errors import DeliveryDeferred
from core.extensions.contract.addresses import REPLY_TAG_MARK, split_reply_address
from core.kernel.scale.placement import ROUTER_SUBSCRIBER
from core.storage import connect

__all__ = ["ORDER_WAIT_S", "ConversationLocks", "advisory_key"]

log = logging.getLogger("core.kernel.scale.turn_lock")

_NAMESPACE = b"hearth.turn:"
ORDER_WAIT_S = 300.0  # longest wait for an earlier message of the conversation
ORDER_POLL_S = 0.05
LOCK_POLL_S = 0.05  # while another process runs a turn of the conversation

# earlier user.message events of one conversation (channel, address or address#reply:tag)
# that the router has not finished: ``open``, in flight or due to be claimed; ``recovered``,
# taken back from a dead process (claimed only alone, so it must not be waited for).
# Neither counts one waiting for a retry: as in one process, a failed message does not
# hold the conversation up.
_EARLIER = """
SELECT count(*) FILTER (WHERE d.status = 'inflight' OR NOT d.recovered) AS open,
       count(*) FILTER (WHERE d.status = 'pending' AND d.recovered) AS recovered
FROM journal_deliveries d JOIN journal_events e ON e.id = d.event_id
WHERE d.subscriber_id = $1 AND d.event_id < $2
  AND (d.status = 'inflight' OR (d.status = 'pending' AND d.next_at <= $6))
  AND e.topic = 'user.message' AND e.payload::jsonb ->> 'channel_id' = $3
  AND (e.payload::jsonb ->> 'user_id' = $4 OR starts_with(e.payload::jsonb ->> 'user_id', $5))
"""


# replies journaled for this node's channels and not sent yet, to one user
_REPLIES_UNSENT = """
SELECT count(*) FROM journal_deliveries d JOIN journal_events e ON e.id = d.event_id
WHERE d.subscriber_id = $1 AND d.status IN ('pending', 'inflight')
  AND e.payload::jsonb ->> 'channel_id' = $2 AND e.payload::jsonb ->> 'user_id' = $3
"""


def advisory_key(conversation: str) -> int:
    """A signed 64-bit advisory lock key for ``conversation`` (BLAKE2b of its key)."""
    digest = hashlib.blake2b(_NAMESPACE + conversation.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class ConversationLocks:
    """``hold(key)``: the process's lock for the conversation, then the database's."""

    def __init__(self, local: Callable[[str], asyncio.Lock], pool: Any, dsn: str) -> None:
        self._local = local
        self._pool = pool  # an asyncpg.Pool, for the order check
        self._dsn = dsn
        self._conn: Any = None  # the session holding this process's conversation locks
        self._io = asyncio.Lock()  # one statement at a time on it

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
        async with self._local(conversation):
            await self._lock(key)
            try:
                yield None
            finally:
                await asyncio.shield(self._locked("SELECT pg_advisory_unlock($1)", key))

    async def _lock(self, key: int) -> None:
        """Until this session holds ``key`` (another process's turn ends, or it dies)."""
        while True:
            if await self._locked("SELECT pg_try_advisory_lock($1)", key):
                return
            await asyncio.sleep(LOCK_POLL_S)

    async def _locked(self, query: str, key: int) -> bool:
        """Run ``query`` on the lock session. A session that died (the server ended it,
        the network dropped) is replaced once: its locks died with it, so an unlock
        has nothing left to do and a lock is simply asked again on the new session."""
        async with self._io:
            for attempt in (1, 2):
                if self._conn is None or self._conn.is_closed():
                    self._conn = await connect(self._dsn)
                try:
                    return bool(await self._conn.fetchval(query, key))
                except (
                    asyncpg.PostgresConnectionError,
                    asyncpg.InterfaceError,
                    InternalClientError,
                    OSError,
                ) as exc:
                    log.warning("the connection holding conversation locks was lost: %s", exc)
                    self._conn.terminate()
                    self._conn = None
                    if "unlock" in query or attempt == 2:
                        return False
            return False

    async def aclose(self) -> None:
        """Close the lock session (every lock it still holds is freed)."""
        async with self._io:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                await conn.close()

    async def replies_sent(
        self, subscriber: str, channel_id: str, user_id: str, timeout_s: float
    ) -> None:
        """Until the replies another node journaled for ``user_id`` are sent by this
        node's ``subscriber`` (one at a time, in order): a turn answered here must not
        overtake them. At most ``timeout_s`` (a reply in retry backoff), then it goes."""
        deadline = time.monotonic() + timeout_s
        while await self._pool.fetchval(_REPLIES_UNSENT, subscriber, channel_id, user_id):
            if time.monotonic() > deadline:
                log.warning(
                    "earlier replies to %s on %s still unsent after %g s; sending this one",
                    user_id,
                    channel_id,
                    timeout_s,
                )
                return
            await asyncio.sleep(ORDER_POLL_S)

    async def _wait_turn(self, event_id: int, channel_id: str, user_id: str) -> None:
        """Until no earlier message of the conversation is open; raises
        ``DeliveryDeferred`` when one was taken back from a dead process."""
        address, _ = split_reply_address(user_id)
        args = (ROUTER_SUBSCRIBER, event_id, channel_id, address, address + REPLY_TAG_MARK)
        deadline = time.monotonic() + ORDER_WAIT_S
        while True:
            earlier = await self._pool.fetchrow(_EARLIER, *args, time.time())
            if earlier["recovered"]:
                raise DeliveryDeferred(
                    f"message {event_id} on {channel_id}: an earlier one of {address} was "
                    "taken back from a dead process and runs first"
                )
            if not earlier["open"]:
                return
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
