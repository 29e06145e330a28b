"""When each manifest schedule last fired, kept in ``<paths.data>/schedules.db``,
or in PostgreSQL with ``storage.backend: postgres`` (ADR 0035).

The instant is written after the fire was published (with an idempotency key
derived from it), so a crash in between re-publishes the same key on the next
start: a no-op for the bus. On PostgreSQL the row is shared by every kernel
process; the schedule leader (one at a time) is the one that writes it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.extensions.sdk import SQLiteStore
from core.storage import ComponentPool, register_migrations

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = ["SCHEDULES_COMPONENT", "FireState"]

SCHEDULES_COMPONENT = "schedules"
register_migrations(
    SCHEDULES_COMPONENT,
    [
        "CREATE TABLE hearth_manifest_fires ("
        " schedule text PRIMARY KEY, last_due double precision NOT NULL)"
    ],
)


class FireState(SQLiteStore):
    """``last_due`` per schedule key; durable across process crashes (WAL, or PostgreSQL)."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS manifest_fires (
        schedule TEXT PRIMARY KEY,      -- '<extension id>:<schedule name>'
        last_due REAL NOT NULL          -- unix seconds of the last fire (or of the first sighting)
    );
    """

    def __init__(self, path: Path, *, storage: StorageSettings | None = None) -> None:
        super().__init__(path)
        self.storage = storage if storage is not None and storage.backend == "postgres" else None
        self._pools = (
            ComponentPool(
                self.storage,
                [SCHEDULES_COMPONENT],
                "manifest schedules' fire state (PostgreSQL) is",
            )
            if self.storage is not None
            else None
        )

    async def open(self) -> None:
        if self._pools is None:
            await super().open()
        else:
            await self._pools.open()

    async def close(self) -> None:
        if self._pools is None:
            await super().close()
        else:
            await self._pools.close()

    @property
    def is_open(self) -> bool:
        return super().is_open if self._pools is None else self._pools.is_open

    async def last_due(self, key: str) -> datetime | None:
        if self.storage is None:
            row = await self.fetch_one(
                "SELECT last_due FROM manifest_fires WHERE schedule = ?", (key,)
            )
            value = None if row is None else row[0]
        else:
            value = await self._postgres().fetchval(
                "SELECT last_due FROM hearth_manifest_fires WHERE schedule = $1", key
            )
        return None if value is None else datetime.fromtimestamp(float(value), UTC)

    async def record(self, key: str, due: datetime) -> None:
        if self.storage is None:
            await self.execute(
                "INSERT INTO manifest_fires (schedule, last_due) VALUES (?, ?)"
                " ON CONFLICT (schedule) DO UPDATE SET last_due = excluded.last_due",
                (key, due.timestamp()),
            )
            return
        await self._postgres().execute(
            "INSERT INTO hearth_manifest_fires (schedule, last_due) VALUES ($1, $2)"
            " ON CONFLICT (schedule) DO UPDATE SET last_due = excluded.last_due",
            key,
            due.timestamp(),
        )

    def _postgres(self) -> Any:
        assert self._pools is not None  # only called with storage.backend postgres
        return self._pools.pool
