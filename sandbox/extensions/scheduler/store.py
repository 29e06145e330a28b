"""Durable schedules in ``<data_dir>/schedules.db`` (stdlib sqlite3 in a worker thread).

One connection, WAL, ``synchronous=NORMAL``: a committed change survives a
crash of the process. Instants are stored as Unix seconds (REAL); ids come
from AUTOINCREMENT so a cancelled id is never reused.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from .model import Action, Schedule, Timing

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    text        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('once', 'cron', 'interval')),
    spec        TEXT NOT NULL,
    timezone    TEXT NOT NULL,
    next_due    REAL NOT NULL,
    channel_id  TEXT,
    action      TEXT NOT NULL CHECK (action IN ('notify', 'agent')),
    topic       TEXT NOT NULL,
    created_at  REAL NOT NULL,
    last_due    REAL,
    fires       INTEGER NOT NULL DEFAULT 0,
    status      TEXT NOT NULL DEFAULT 'active'
                CHECK (status IN ('active', 'done', 'cancelled')),
    user_id     TEXT
);
CREATE INDEX IF NOT EXISTS schedules_by_due ON schedules (status, next_due);
"""
_COLUMNS = (
    "id, text, kind, spec, timezone, next_due, channel_id, action, topic,"
    " created_at, last_due, fires, status, user_id"
)


class ScheduleStore:
    """CRUD and due-time queries over the ``schedules`` table."""

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
        conn.executescript(_SCHEMA)
        _add_user_column(conn)
        return conn

    async def close(self) -> None:
        async with self._lock:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                await asyncio.to_thread(conn.close)

    # ------------------------------------------------------------ writes

    async def add(
        self,
        *,
        text: str,
        timing: Timing,
        timezone: str,
        next_due: datetime,
        channel_id: str | None,
        action: Action,
        topic: str,
        created_at: datetime,
        user_id: str | None = None,
    ) -> Schedule:
        def work(conn: sqlite3.Connection) -> int:
            cursor = conn.execute(
                "INSERT INTO schedules (text, kind, spec, timezone, next_due, channel_id,"
                " action, topic, created_at, user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    text,
                    timing.kind,
                    timing.spec,
                    timezone,
                    next_due.timestamp(),
                    channel_id,
                    action,
                    topic,
                    created_at.timestamp(),
                    user_id,
                ),
            )
            assert cursor.lastrowid is not None
            return cursor.lastrowid

        schedule = await self.get(await self._call(work))
        assert schedule is not None
        return schedule

    async def advance(
        self, schedule_id: int, fired_due: datetime, next_due: datetime | None
    ) -> None:
        """Record the fire of ``fired_due``; ``next_due=None`` finishes the schedule."""
        await self._execute(
            "UPDATE schedules SET last_due = ?, fires = fires + 1,"
            " next_due = COALESCE(?, next_due),"
            " status = CASE WHEN ? IS NULL THEN 'done' ELSE status END"
            " WHERE id = ? AND status = 'active' AND ABS(next_due - ?) < 0.000001",
            (
                fired_due.timestamp(),
                None if next_due is None else next_due.timestamp(),
                None if next_due is None else 1,
                schedule_id,
                fired_due.timestamp(),
            ),
        )

    async def cancel(self, schedule_id: int) -> bool:
        changed = await self._execute(
            "UPDATE schedules SET status = 'cancelled' WHERE id = ? AND status = 'active'",
            (schedule_id,),
        )
        return changed > 0

    async def update(
        self, schedule_id: int, *, text: str, timing: Timing, next_due: datetime
    ) -> bool:
        changed = await self._execute(
            "UPDATE schedules SET text = ?, kind = ?, spec = ?, next_due = ?"
            " WHERE id = ? AND status = 'active'",
            (text, timing.kind, timing.spec, next_due.timestamp(), schedule_id),
        )
        return changed > 0

    # ------------------------------------------------------------ reads

    async def get(self, schedule_id: int) -> Schedule | None:
        rows = await self._select(f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,))
        return rows[0] if rows else None

    async def active(self) -> list[Schedule]:
        return await self._select(
            f"SELECT {_COLUMNS} FROM schedules WHERE status = 'active' ORDER BY next_due, id", ()
        )

    async def due(self, now: datetime) -> list[Schedule]:
        return await self._select(
            f"SELECT {_COLUMNS} FROM schedules WHERE status = 'active' AND next_due <= ?"
            " ORDER BY next_due, id",
            (now.timestamp(),),
        )

    async def next_due(self) -> datetime | None:
        def work(conn: sqlite3.Connection) -> float | None:
            row = conn.execute(
                "SELECT MIN(next_due) FROM schedules WHERE status = 'active'"
            ).fetchone()
            return None if row is None or row[0] is None else float(row[0])

        seconds = await self._call(work)
        return None if seconds is None else datetime.fromtimestamp(seconds, UTC)

    # ------------------------------------------------------------ plumbing

    async def _select(self, sql: str, args: tuple[Any, ...]) -> list[Schedule]:
        rows = await self._call(lambda conn: conn.execute(sql, args).fetchall())
        return [_schedule(row) for row in rows]

    async def _execute(self, sql: str, args: tuple[Any, ...]) -> int:
        return await self._call(lambda conn: conn.execute(sql, args).rowcount)

    async def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise RuntimeError(f"{self.path}: the schedule store is not open")
            return await asyncio.to_thread(work, conn)


def _add_user_column(conn: sqlite3.Connection) -> None:
    """Migration: stores made before reminders recorded who set them get a
    ``user_id`` column; their rows keep NULL and fire to the channel's default."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(schedules)")}
    if "user_id" not in columns:
        conn.execute("ALTER TABLE schedules ADD COLUMN user_id TEXT")


def _instant(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _schedule(row: tuple[Any, ...]) -> Schedule:
    *head, user_id = row
    sid, text, kind, spec, tz, next_due, channel, action, topic, created, last, fires, status = head
    return Schedule(
        id=int(sid),
        text=text,
        kind=kind,
        spec=spec,
        timezone=tz,
        next_due=datetime.fromtimestamp(next_due, UTC),
        channel_id=channel,
        action=action,
        topic=topic,
        created_at=datetime.fromtimestamp(created, UTC),
        last_due=_instant(last),
        fires=int(fires),
        status=status,
        user_id=user_id,
    )
