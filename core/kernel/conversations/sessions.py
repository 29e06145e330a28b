"""Which ``agents`` session a conversation currently uses.

A conversation is (channel, user). ``/new`` moves it to a fresh session id
(``session_ids``: the key escaped, then ``#<generation>``); old histories
stay in the sessions database, and the ``session_ended`` callbacks (the
kernel's: forget extension state of that session) get the old id. Sessions
are cached so a turn finds the history it keeps in memory (``LedgerSession``).
Storage goes through a ``SessionStorage`` (``sessions.db``, or PostgreSQL:
ADR 0035, 0062), whose one database every session uses; when other processes
share it, a conversation's generation is read back before each use.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from core.extensions.contract.addresses import split_reply_address
from core.kernel.conversations.ledger import ConversationSession
from core.kernel.conversations.session_ids import conversation_of, session_id_of
from core.kernel.conversations.session_storage import (
    LEDGER_RETENTION_S,
    SessionStorage,
    session_storage_for,
)

if TYPE_CHECKING:
    from core.config import Settings

log = logging.getLogger("core.kernel.conversations.sessions")

SessionEnded = Callable[[str], Awaitable[object]]
CACHE_SIZE = 64  # open sessions kept (more while messages use them)
__all__ = ["LEDGER_RETENTION_S", "Conversations", "conversation_of"]


class Conversations:
    """Session ids and session objects (``ConversationSession``) for every conversation."""

    def __init__(
        self,
        db_path: Path,
        *,
        synchronous: str = "normal",
        cache_size: int = CACHE_SIZE,
        storage: SessionStorage | None = None,
        session_ended: Sequence[SessionEnded] = (),
    ) -> None:
        self.db_path = db_path
        self.cache_size = cache_size
        self.synchronous = synchronous.upper()  # ``events.synchronous``: same durability
        self.storage = storage or SessionStorage.at(db_path, synchronous=synchronous)
        self._generations: dict[str, int] = {}
        self._sessions: OrderedDict[str, tuple[str, ConversationSession]] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._command_locks: dict[str, asyncio.Lock] = {}
        self._held: Counter[str] = Counter()
        self.session_ended: list[SessionEnded] = list(session_ended)

    @classmethod
    def of(
        cls, settings: Settings, db_path: Path, session_ended: Sequence[SessionEnded] = ()
    ) -> Conversations:
        """The kernel's: on ``db_path`` or PostgreSQL (``storage.backend``), written with
        the journal's durability (``events.synchronous``); ``session_ended`` run after a
        session ends."""
        storage = session_storage_for(settings, db_path)
        return cls(
            db_path,
            synchronous=settings.events.synchronous,
            storage=storage,
            session_ended=session_ended,
        )

    async def open(self) -> None:
        self._generations = await self.storage.open()

    def close(self) -> None:
        """Forget every cached session (``aclose`` also closes the database)."""
        for _, session in self._sessions.values():
            session.close()
        self._sessions.clear()

    async def aclose(self) -> None:
        """``close``, then the storage's database (closing the SQLite connection
        checkpoints the WAL; a PostgreSQL pool is given back)."""
        self.close()
        await self.storage.aclose()

    @staticmethod
    def key(channel_id: str, user_id: str) -> str:
        """``user_id`` is the address the channel gives a conversation: a person, or
        a chat where channels have them (Telegram: the chat id, ADR 0017). A reply
        tag on it (``alice#reply:x1``, ADR 0024) names one request, not another
        conversation: it is left out of the key."""
        address, _ = split_reply_address(user_id)
        return f"{channel_id}:{address}"

    def lock(self, key: str) -> asyncio.Lock:
        """Turns of one conversation run one at a time, in arrival order."""
        return self._locks.setdefault(key, asyncio.Lock())

    def command_lock(self, key: str) -> asyncio.Lock:
        """Slash commands of one conversation are answered one at a time, in arrival
        order, so their replies come in the order they were typed. A lock of their
        own: a command never waits for a turn (``/status`` answers while a long turn runs)."""
        return self._command_locks.setdefault(key, asyncio.Lock())

    @contextmanager
    def held(self, key: str) -> Iterator[None]:
        """While a message of the conversation is being answered, its sessions stay
        open: the cache closes only sessions no message is using."""
        self._held[key] += 1
        try:
            yield
        finally:
            self._held[key] -= 1
            if not self._held[key]:
                del self._held[key]

    def session_id(self, key: str) -> str:
        return session_id_of(key, self._generations.get(key, 0))

    async def session(self, key: str) -> ConversationSession:
        """The conversation's current session (built off the loop on first use)."""
        if self.storage.shared:  # another process may have run /new
            self._generations[key] = await self.storage.generation(key)
        return await self.session_by_id(self.session_id(key))

    async def session_by_id(self, session_id: str) -> ConversationSession:
        """A session by its id — also one ``/new`` has left (a paused turn finishes
        in the session it started in)."""
        cached = self._sessions.get(session_id)
        if cached is not None:
            self._sessions.move_to_end(session_id)
            return cached[1]
        session = await self.storage.session(session_id)
        raced = self._sessions.get(session_id)
        if raced is not None:  # another task built it while this one waited
            await self.storage.close_session(session)
            return raced[1]
        self._sessions[session_id] = (conversation_of(session_id), session)
        for evicted in self._evictable():
            await self.storage.close_session(evicted)
        return session

    def _evictable(self) -> list[ConversationSession]:
        """The least recently used sessions beyond the cache size that no message is
        using (held ones stay, so the cache may be over its size for a while)."""
        over = len(self._sessions) - self.cache_size
        idle = [sid for sid, (key, _) in self._sessions.items() if key not in self._held]
        return [self._sessions.pop(sid)[1] for sid in idle[: max(0, over)]]

    async def start_new(self, key: str) -> str:
        """Begin a fresh session for this conversation; returns its id. The old
        session's ``session_ended`` callbacks run after (a failing one is logged)."""
        if self.storage.shared:
            self._generations[key] = await self.storage.generation(key)
        ended = self.session_id(key)
        generation = self._generations.get(key, 0) + 1
        await self.storage.write_generation(key, generation)
        self._generations[key] = generation
        for callback in self.session_ended:
            try:
                await callback(ended)
            except Exception:
                log.exception("after /new: cleaning up session %s failed", ended)
        return self.session_id(key)
