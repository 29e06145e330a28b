"""When each manifest schedule last fired, kept in ``<paths.data>/schedules.db``,
or in PostgreSQL with ``storage.backend: postgres`` (ADR 0035).

The instant is written after the fire was published (with an idempotency key
derived from it), so a crash in between re-publishes the same key on the next
start: a no-op for the bus. On PostgreSQL the row is shared by every kernel
process; the schedule leader (one at a time) is the one that writes it.

Written once against ``core.storage`` (ADR 0080): ``schedules.db`` on a
connection of its own (WAL), PostgreSQL through the process's pool; the
``schedules`` component's migrations are the one runner's on both. A
``schedules.db`` written before the runner had the table ``manifest_fires``:
its second SQLite migration renames it, rows kept, to the name PostgreSQL has.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from core.storage import Database, PostgresDatabase, SQLiteDatabase, register_migrations, upsert

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = ["SCHEDULES_COMPONENT", "FireState"]

SCHEDULES_COMPONENT = "schedules"
TABLE = "hearth_manifest_fires"
register_migrations(
    SCHEDULES_COMPONENT,
    [f"CREATE TABLE {TABLE} (schedule text PRIMARY KEY, last_due double precision NOT NULL)"],
    sqlite=[
        # version 1: the table the code before the runner created at every open
        "CREATE TABLE IF NOT EXISTS manifest_fires ("
        " schedule TEXT PRIMARY KEY,"  # '<extension id>:<schedule name>'
        " last_due REAL NOT NULL)",  # unix seconds of the last fire (or first sighting)
        f"ALTER TABLE manifest_fires RENAME TO {TABLE}",
    ],
)
_RECORD = upsert(TABLE, ("schedule", "last_due"), ("schedule",))


class FireState:
    """``last_due`` per schedule key; durable across process crashes (WAL, or PostgreSQL)."""

    def __init__(self, path: Path, *, storage: StorageSettings | None = None) -> None:
        self.path = path
        self.db: Database
        if storage is not None and storage.backend == "postgres":
            self.db = PostgresDatabase(
                storage, [SCHEDULES_COMPONENT], "manifest schedules' fire state (PostgreSQL) is"
            )
        else:
            self.db = SQLiteDatabase(path, [SCHEDULES_COMPONENT], wal=True)

    async def open(self) -> None:
        """Open and migrate; a second call does nothing."""
        await self.db.open()

    async def close(self) -> None:
        """Close (the database may be opened again)."""
        await self.db.close()

    @property
    def is_open(self) -> bool:
        return self.db.is_open

    async def last_due(self, key: str) -> datetime | None:
        value = await self.db.fetch_value(f"SELECT last_due FROM {TABLE} WHERE schedule = ?", key)
        return None if value is None else datetime.fromtimestamp(float(value), UTC)

    async def record(self, key: str, due: datetime) -> None:
        await self.db.execute(_RECORD, key, due.timestamp())
