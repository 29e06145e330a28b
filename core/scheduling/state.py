"""When each manifest schedule last fired, kept in ``<paths.data>/schedules.db``.

The instant is written after the fire was published (with an idempotency key
derived from it), so a crash in between re-publishes the same key on the next
start: a no-op for the bus. sqlite3 calls run in a worker thread.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["FireState"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS manifest_fires (
    schedule TEXT PRIMARY KEY,      -- '<extension id>:<schedule name>'
    last_due REAL NOT NULL          -- unix seconds of the last fire (or of the first sighting)
)
"""


class FireState:
    """``last_due`` per schedule key; durable across process crashes (WAL)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        if self._conn is None:
            self._conn = await asyncio.to_thread(self._connect)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(_SCHEMA)
        return conn

    async def close(self) -> None:
        async with self._lock:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                await asyncio.to_thread(conn.close)

    async def last_due(self, key: str) -> datetime | None:
        row = await self._run("SELECT last_due FROM manifest_fires WHERE schedule = ?", (key,))
        if row is None:
            return None
        seconds = row[0]
        assert isinstance(seconds, float | int)
        return datetime.fromtimestamp(seconds, UTC)

    async def record(self, key: str, due: datetime) -> None:
        await self._run(
            "INSERT INTO manifest_fires (schedule, last_due) VALUES (?, ?)"
            " ON CONFLICT (schedule) DO UPDATE SET last_due = excluded.last_due",
            (key, due.timestamp()),
        )

    async def _run(self, sql: str, args: tuple[object, ...]) -> tuple[object, ...] | None:
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise RuntimeError(f"{self.path}: schedule state is not open")

            def work() -> tuple[object, ...] | None:
                row: tuple[object, ...] | None = conn.execute(sql, args).fetchone()
                return row

            return await asyncio.to_thread(work)
