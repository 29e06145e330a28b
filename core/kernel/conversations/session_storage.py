"""Where conversations' sessions live: ``sessions.db`` (SQLite) or PostgreSQL.

``Conversations`` keeps the cache, the locks and the ``/new`` logic; what it
reads and writes goes through a ``SessionStorage``. ``SQLiteSessionStorage``
is the code ``Conversations`` always had (one connection per call, in a
worker thread); ``PostgresSessionStorage`` uses the process's pool and the
``sessions`` migrations (ADR 0035). ``shared`` says whether other kernel
processes write the same store: then the generation of a conversation is
read back before each use instead of trusted from memory.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from core.kernel.conversations.ledger import ConversationSession, LedgerSession
from core.kernel.conversations.session_schema import SESSIONS_COMPONENT  # registers its migrations
from core.storage import ComponentPool, SQLiteDatabase

if TYPE_CHECKING:
    from core.config import Settings, StorageSettings

__all__ = [
    "LEDGER_RETENTION_S",
    "PostgresSessionStorage",
    "SQLiteSessionStorage",
    "SessionStorage",
    "session_storage_for",
]


LEDGER_RETENTION_S = 30 * 86400.0  # a message is never redelivered this late (ADR 0014)


class SessionStorage(Protocol):
    """The storage side of ``Conversations``."""

    shared: bool  # other processes write it too: nothing read may be trusted for long

    async def open(self) -> dict[str, int]:
        """Create what is missing, prune old ledger rows; every conversation's generation."""
        ...

    async def generation(self, key: str) -> int: ...

    async def write_generation(self, key: str, generation: int) -> None: ...

    async def session(self, session_id: str) -> ConversationSession: ...

    async def close_session(self, session: ConversationSession) -> None: ...

    async def aclose(self) -> None: ...


class SQLiteSessionStorage:
    """``sessions.db``: a ``LedgerSession`` (the SDK's ``SQLiteSession``) per session."""

    shared = False

    def __init__(self, db_path: Path, *, synchronous: str = "normal") -> None:
        self.db_path = db_path
        self.synchronous = synchronous.upper()

    async def open(self) -> dict[str, int]:
        """Migrate ``sessions.db`` (the one runner, ADR 0051), then as below."""
        db = SQLiteDatabase(self.db_path, [SESSIONS_COMPONENT], synchronous=self.synchronous)
        await db.open()
        await db.close()
        return await asyncio.to_thread(self._open_store)

    async def generation(self, key: str) -> int:
        return await asyncio.to_thread(self._read_generation, key)

    async def write_generation(self, key: str, generation: int) -> None:
        await asyncio.to_thread(self._write_generation, key, generation)

    async def session(self, session_id: str) -> ConversationSession:
        session = await asyncio.to_thread(LedgerSession, session_id, self.db_path)
        session.synchronous = self.synchronous
        return session

    async def close_session(self, session: ConversationSession) -> None:
        await asyncio.to_thread(session.close)

    async def aclose(self) -> None:
        """Nothing held: every connection opened here is closed after its call."""

    def _connect(self) -> closing[sqlite3.Connection]:
        """A connection that is *closed* (not only committed) when the block ends."""
        return closing(sqlite3.connect(self.db_path))

    def _open_store(self) -> dict[str, int]:
        with self._connect() as conn:
            conn.execute(
                "DELETE FROM hearth_turns WHERE created_at < ?", (time.time() - LEDGER_RETENTION_S,)
            )
            rows = conn.execute("SELECT key, generation FROM hearth_conversations").fetchall()
            conn.commit()
        return {str(k): int(g) for k, g in rows}

    def _read_generation(self, key: str) -> int:
        with self._connect() as conn:
            row = conn.execute(
                "SELECT generation FROM hearth_conversations WHERE key = ?", (key,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def _write_generation(self, key: str, generation: int) -> None:
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO hearth_conversations(key, generation, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT(key) DO UPDATE SET generation = excluded.generation,"
                " updated_at = excluded.updated_at",
                (key, generation, time.time()),
            )
            conn.commit()


class PostgresSessionStorage:
    """The ``sessions`` tables in PostgreSQL, shared by every kernel process."""

    shared = True

    def __init__(self, storage: StorageSettings, *, synchronous: str = "normal") -> None:
        self.storage = storage
        self.synchronous = synchronous  # ``events.synchronous``: see ``PostgresLedgerSession``
        self._pools = ComponentPool(
            storage, [SESSIONS_COMPONENT], "the PostgreSQL session storage is"
        )

    @property
    def pool(self) -> Any:
        return self._pools.pool

    async def open(self) -> dict[str, int]:
        await self._pools.open()
        await self.pool.execute(
            "DELETE FROM hearth_turns WHERE created_at < $1", time.time() - LEDGER_RETENTION_S
        )
        rows = await self.pool.fetch("SELECT key, generation FROM hearth_conversations")
        return {str(k): int(g) for k, g in rows}

    async def generation(self, key: str) -> int:
        value = await self.pool.fetchval(
            "SELECT generation FROM hearth_conversations WHERE key = $1", key
        )
        return 0 if value is None else int(value)

    async def write_generation(self, key: str, generation: int) -> None:
        await self.pool.execute(
            "INSERT INTO hearth_conversations(key, generation, updated_at) VALUES ($1, $2, $3)"
            " ON CONFLICT (key) DO UPDATE SET generation = excluded.generation,"
            " updated_at = excluded.updated_at",
            key,
            generation,
            time.time(),
        )

    async def session(self, session_id: str) -> ConversationSession:
        from core.kernel.conversations.ledger_pg import PostgresLedgerSession

        return PostgresLedgerSession(session_id, self.pool, synchronous=self.synchronous)

    async def close_session(self, session: ConversationSession) -> None:
        """Nothing to close: the session's connections belong to the pool."""

    async def aclose(self) -> None:
        await self._pools.close()


def session_storage_for(settings: Settings, db_path: Path) -> SessionStorage:
    """PostgreSQL with ``storage.backend: postgres``, else ``db_path`` (``sessions.db``,
    written with the journal's durability, ``events.synchronous``)."""
    if settings.storage.backend == "postgres":
        return PostgresSessionStorage(settings.storage, synchronous=settings.events.synchronous)
    return SQLiteSessionStorage(db_path, synchronous=settings.events.synchronous)
