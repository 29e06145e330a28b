"""Where conversations' sessions live: the ``sessions`` component's database.

``Conversations`` keeps the cache, the locks and the ``/new`` logic; what it
reads and writes goes through a ``SessionStorage``: the generations of
conversations and a ``LedgerSession`` per session, on ``sessions.db`` or on
PostgreSQL (``storage.backend: postgres``), written once against the storage
layer (ADR 0051, 0062). ``shared`` says whether other kernel processes write
the same store: then the generation of a conversation is read back before
each use instead of trusted from memory.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from core.kernel.conversations.ledger import LedgerSession
from core.kernel.conversations.session_schema import SESSIONS_COMPONENT  # registers its migrations
from core.storage import Database, PostgresDatabase, SQLiteDatabase, upsert

if TYPE_CHECKING:
    from core.config import Settings, StorageSettings

__all__ = ["LEDGER_RETENTION_S", "SessionStorage", "session_storage_for"]


LEDGER_RETENTION_S = 30 * 86400.0  # a message is never redelivered this late (ADR 0014)

_GENERATION = upsert("hearth_conversations", ("key", "generation", "updated_at"), ("key",))


class SessionStorage:
    """The ``sessions`` tables on one ``Database``, shared with every session it opens."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    def at(
        cls, db_path: Path, storage: StorageSettings | None = None, *, synchronous: str = "normal"
    ) -> SessionStorage:
        """PostgreSQL with ``storage.backend: postgres``, else ``db_path``
        (``sessions.db``, in WAL mode as the SDK's sessions kept it); written with
        the journal's durability (``events.synchronous``) on both."""
        if storage is not None and storage.backend == "postgres":
            return cls(
                PostgresDatabase(
                    storage,
                    [SESSIONS_COMPONENT],
                    "the PostgreSQL session storage is",
                    synchronous=synchronous,
                )
            )
        return cls(SQLiteDatabase(db_path, [SESSIONS_COMPONENT], synchronous=synchronous, wal=True))

    @property
    def shared(self) -> bool:
        """Other processes write it too: nothing read may be trusted for long."""
        return self.db.shared

    async def open(self) -> dict[str, int]:
        """Open and migrate (the one runner, ADR 0051), prune old ledger rows; every
        conversation's generation."""
        await self.db.open()
        async with self.db.transaction() as tx:
            await tx.write(
                "DELETE FROM hearth_turns WHERE created_at < ?", time.time() - LEDGER_RETENTION_S
            )
            rows = await tx.fetch_all("SELECT key, generation FROM hearth_conversations")
        return {str(k): int(g) for k, g in rows}

    async def generation(self, key: str) -> int:
        value = await self.db.fetch_value(
            "SELECT generation FROM hearth_conversations WHERE key = ?", key
        )
        return 0 if value is None else int(value)

    async def write_generation(self, key: str, generation: int) -> None:
        await self.db.write(_GENERATION, key, generation, time.time())

    async def session(self, session_id: str) -> LedgerSession:
        return LedgerSession(session_id, self.db)

    async def close_session(self, session: object) -> None:
        """Nothing to close: a session's statements go through the storage's database."""

    async def aclose(self) -> None:
        await self.db.close()


def session_storage_for(settings: Settings, db_path: Path) -> SessionStorage:
    """PostgreSQL with ``storage.backend: postgres``, else ``db_path`` (``sessions.db``),
    written with the journal's durability (``events.synchronous``)."""
    return SessionStorage.at(db_path, settings.storage, synchronous=settings.events.synchronous)
