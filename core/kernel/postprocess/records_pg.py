"""``/last``'s records in PostgreSQL (``storage.backend: postgres``, ADR 0035).

The rows are written by ``PostTurnRecord.write_postgres`` inside the
ledger's transaction; this reads them back and prunes them with the ledger's
retention, like ``PostRecords`` does in ``sessions.db``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from core.kernel.postprocess.records import StoredResult, latest_query, stored_results
from core.kernel.session_schema import SESSIONS_COMPONENT
from core.storage import ComponentPool

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = ["PostgresPostRecords"]


class PostgresPostRecords:
    """The ``hearth_post_*`` tables of the ``sessions`` component."""

    def __init__(self, storage: StorageSettings, *, retention_s: float) -> None:
        self.storage = storage
        self.retention_s = retention_s
        self._pools = ComponentPool(storage, [SESSIONS_COMPONENT], "post-processing records are")

    async def open(self) -> None:
        """Take the process's pool, migrate, and drop records older than the ledger keeps."""
        pool = await self._pools.open()
        cutoff = time.time() - self.retention_s
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM hearth_post_results WHERE created_at < $1", cutoff)
            await conn.execute("DELETE FROM hearth_post_turns WHERE created_at < $1", cutoff)

    def pool(self) -> Any:
        """The open pool (the ledger writes the records through its own transaction)."""
        return self._pools.pool

    async def latest(self, conversation: str, name: str | None = None) -> list[StoredResult]:
        """The newest result named ``name``, or every result of the newest turn."""
        query, args = latest_query(conversation, name, "$", "id")
        return stored_results(await self.pool().fetch(query, *args), name)

    async def aclose(self) -> None:
        await self._pools.close()
