"""When each manifest schedule last fired, kept in ``<paths.data>/schedules.db``.

The instant is written after the fire was published (with an idempotency key
derived from it), so a crash in between re-publishes the same key on the next
start: a no-op for the bus.
"""

from __future__ import annotations

from datetime import UTC, datetime

from core.extensions.sdk import SQLiteStore

__all__ = ["FireState"]


class FireState(SQLiteStore):
    """``last_due`` per schedule key; durable across process crashes (WAL)."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS manifest_fires (
        schedule TEXT PRIMARY KEY,      -- '<extension id>:<schedule name>'
        last_due REAL NOT NULL          -- unix seconds of the last fire (or of the first sighting)
    );
    """

    async def last_due(self, key: str) -> datetime | None:
        row = await self.fetch_one("SELECT last_due FROM manifest_fires WHERE schedule = ?", (key,))
        return None if row is None else datetime.fromtimestamp(float(row[0]), UTC)

    async def record(self, key: str, due: datetime) -> None:
        await self.execute(
            "INSERT INTO manifest_fires (schedule, last_due) VALUES (?, ?)"
            " ON CONFLICT (schedule) DO UPDATE SET last_due = excluded.last_due",
            (key, due.timestamp()),
        )
