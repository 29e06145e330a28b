"""Which journal the bus runs on: ``storage.backend`` decides (ADR 0034).

``sqlite`` (the default): ``SQLiteJournal`` at the kernel's journal file.
``postgres``: ``PostgresJournal`` on ``storage.postgres_dsn``, shared by every
kernel process pointed at that database. The PostgreSQL code (and asyncpg)
is imported only when chosen.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from core.events.journal import Journal
from core.events.sqlite_journal import SQLiteJournal

if TYPE_CHECKING:
    from core.config import EventsSettings, StorageSettings

__all__ = ["journal_for"]


def journal_for(
    path: str | Path, events: EventsSettings, storage: StorageSettings | None = None
) -> Journal:
    """The journal ``storage`` asks for; ``path`` is the SQLite file (unused for PostgreSQL)."""
    if storage is None or storage.backend == "sqlite":
        return SQLiteJournal(path, synchronous=events.synchronous)
    from core.events.pg_journal import PostgresJournal

    if not storage.postgres_dsn:
        raise ValueError("storage.postgres_dsn: needed when storage.backend is postgres")
    return PostgresJournal(
        storage.postgres_dsn,
        lease_s=storage.process_lease_s,
        pool_min_size=storage.pool_min_size,
        pool_max_size=storage.pool_max_size,
    )
