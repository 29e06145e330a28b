"""Notices held for a person until the channel they were sent to is up (ADR 0076).

A proactive message addressed to someone other than the owner (a member, a
group chat, an identity nobody lists) whose channel is not loaded is never
sent elsewhere: it is kept here, in ``state.db`` (or the kernel's
PostgreSQL), and sent when that channel is wired again — after a reload, a
restart, the supervisor's restart of a failed channel. A notice is keyed by
its idempotency key, so the bus re-delivering the event that brought it holds
it once; it is deleted only after its channel took it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.storage import Database, PostgresDatabase, SQLiteDatabase, register_migrations

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = ["HELD_COMPONENT", "HeldNotice", "HeldNotices"]

HELD_COMPONENT = "held_notices"
TABLE = "hearth_held_notices"

register_migrations(
    HELD_COMPONENT,
    postgres=[
        f"""
        CREATE TABLE {TABLE} (
            key text PRIMARY KEY, channel_id text NOT NULL, user_id text NOT NULL,
            text text NOT NULL, source text NOT NULL, held_at double precision NOT NULL
        );
        CREATE INDEX {TABLE}_by_channel ON {TABLE} (channel_id, held_at);
        """
    ],
    sqlite=[
        f"""
        CREATE TABLE IF NOT EXISTS {TABLE} (
            key TEXT PRIMARY KEY, channel_id TEXT NOT NULL, user_id TEXT NOT NULL,
            text TEXT NOT NULL, source TEXT NOT NULL, held_at REAL NOT NULL
        );
        CREATE INDEX IF NOT EXISTS {TABLE}_by_channel ON {TABLE} (channel_id, held_at);
        """
    ],
)
_COLUMNS = "key, channel_id, user_id, text, source, held_at"


@dataclass(frozen=True, slots=True)
class HeldNotice:
    """One message waiting for its channel: where it goes, what it says, who sent it
    (an extension's id, or ``kernel``)."""

    key: str
    channel_id: str
    user_id: str
    text: str
    source: str
    held_at: float


class HeldNotices:
    """The held notices; the database is opened (and migrated) on first use."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    def at(
        cls, db_path: Path, storage: StorageSettings | None = None, *, synchronous: str = "normal"
    ) -> HeldNotices:
        """PostgreSQL with ``storage.backend: postgres``, else ``db_path`` (``state.db``)."""
        if storage is not None and storage.backend == "postgres":
            return cls(
                PostgresDatabase(
                    storage, [HELD_COMPONENT], "the held notices are", synchronous=synchronous
                )
            )
        return cls(SQLiteDatabase(db_path, [HELD_COMPONENT], synchronous=synchronous, wal=True))

    async def _ready(self) -> Database:
        if not self.db.is_open:
            await self.db.open()
        return self.db

    async def hold(
        self, channel_id: str, user_id: str, text: str, key: str | None, source: str
    ) -> None:
        """Keep one notice (a key held already is kept once)."""
        db = await self._ready()
        await db.execute(
            f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (key) DO NOTHING",
            key or f"held:{uuid.uuid4().hex}",
            channel_id,
            user_id,
            text,
            source,
            time.time(),
        )

    async def waiting(
        self, channel_id: str, user_id: str | None = None, source: str | None = None
    ) -> list[HeldNotice]:
        """What waits for ``channel_id`` (for ``user_id`` there, sent by ``source``, when
        given), oldest first."""
        sql = f"SELECT {_COLUMNS} FROM {TABLE} WHERE channel_id = ?"
        args = [channel_id]
        for column, value in (("user_id", user_id), ("source", source)):
            if value is not None:
                sql, args = f"{sql} AND {column} = ?", [*args, value]
        db = await self._ready()
        rows = await db.fetch_all(sql + " ORDER BY held_at, key", *args)
        return [
            HeldNotice(str(k), str(c), str(u), str(t), str(s), float(h))
            for k, c, u, t, s, h in rows
        ]

    async def release(self, key: str) -> None:
        """Forget a notice its channel took."""
        db = await self._ready()
        await db.execute(f"DELETE FROM {TABLE} WHERE key = ?", key)

    async def aclose(self) -> None:
        """Give the connection back (kernel stop); a later call opens it again."""
        await self.db.close()
